// GBNF front end: llama.cpp syntax, acceptance, and error reporting.
#include <gtest/gtest.h>

#include "common/check.h"
#include "structured/structured.h"

namespace deepinfer::structured {
namespace {

const char* kJsonGbnf = R"(# JSON in GBNF, written for this test
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
)";

TEST(Gbnf, JsonGrammar) {
  auto g = compile_gbnf(kJsonGbnf);
  for (const char* ok : {"{}", "[]", "1", "-0.5e+10", "\"a\\u00e9\\n\"", "{\"a\": [1, 2, {\"b\": null}]}",
                         "[true,false,null]", "\"héllo 世界\"", "{ \"k\" : \"v\" }"})
    EXPECT_TRUE(matches(*g, ok)) << ok;
  for (const char* bad : {"{", "[1,]", "01", "\"\\x\"", "{\"a\" 1}", "tru", "\"a", "{}}", "\"\x01\""})
    EXPECT_FALSE(matches(*g, bad)) << bad;
}

TEST(Gbnf, SyntaxFeatures) {
  auto g = compile_gbnf(
      "root ::= greeting (\",\" ws name)? \"!\"\n"
      "greeting ::= \"hello\" | \"hi\" |\n"
      "   \"hey\"   # continued after a trailing |\n"
      "name ::= [A-Z] [a-z]{1,5}\n"
      "ws ::= \" \"?\n");
  EXPECT_TRUE(matches(*g, "hello!"));
  EXPECT_TRUE(matches(*g, "hey, Bob!"));
  EXPECT_TRUE(matches(*g, "hi,Alice!"));
  EXPECT_FALSE(matches(*g, "hi, Alexander!"));
  EXPECT_FALSE(matches(*g, "hi, bob!"));
}

TEST(Gbnf, MultilineGroupsAndEscapes) {
  auto g = compile_gbnf(
      "root ::= (\n"
      "    \"a\" |\n"
      "    [\\x41-\\x43] |\n"
      "    \"\\u00e9\" | \"\\U0001F600\" | [\\-\\]] | .\n"
      ")+\n");
  EXPECT_TRUE(matches(*g, "aBé😀-]z"));
  EXPECT_FALSE(matches(*g, ""));
}

TEST(Gbnf, LeftRecursionAndAmbiguity) {
  auto g = compile_gbnf(
      "root ::= expr\n"
      "expr ::= expr \"+\" term | expr \"-\" term | term\n"
      "term ::= term \"*\" atom | atom\n"
      "atom ::= [0-9]+ | \"(\" expr \")\"\n");
  EXPECT_TRUE(matches(*g, "1+2*3-(4+5)*6"));
  EXPECT_TRUE(matches(*g, "((((7))))"));
  EXPECT_FALSE(matches(*g, "1+"));
  EXPECT_FALSE(matches(*g, "(1"));
  auto amb = compile_gbnf("root ::= x\nx ::= x x | \"a\" | \"\"\n");
  EXPECT_TRUE(matches(*amb, std::string(200, 'a')));
  EXPECT_TRUE(matches(*amb, ""));
  EXPECT_FALSE(matches(*amb, "ab"));
}

TEST(Gbnf, EmptyLanguageCompiles) {
  auto g = compile_gbnf("root ::= a\na ::= \"x\" a\n");  // no finite derivation
  EXPECT_TRUE(g->empty_language());
  EXPECT_FALSE(matches(*g, "x"));
  EXPECT_FALSE(matches(*g, ""));
}

TEST(Gbnf, Errors) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"root ::= foo\n", "undefined rule 'foo'"},
           {"start ::= \"a\"\n", "no 'root' rule"},
           {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
           {"root ::= \"abc\n", "unterminated string"},
           {"root ::= [abc\n", "unterminated character class"},
           {"root ::= (\"a\"\n", "expected ')'"},
           {"root ::= * \"a\"\n", "repetition operator without"},
           {"root ::= \"a\"{3,1}\n", "m > n"},
           {"root ::= \"a\"{99999999}\n", "above the limit"},
           {"root ::= <[123]>\n", "token references"},
           {"root := \"a\"\n", "expected '::='"},
           {"root ::= \"\\q\"\n", "unknown escape"},
       }) {
    try {
      compile_gbnf(c.text);
      ADD_FAILURE() << "no error for " << c.text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TEST(Gbnf, DeepNestingIsRefused) {
  std::string text = "root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')') + "\n";
  EXPECT_THROW(compile_gbnf(text), InputError);
}

}  // namespace
}  // namespace deepinfer::structured
