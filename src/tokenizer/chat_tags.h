// The special strings of DeepSeek-V4.1's chat format (MODEL_V41.md §10). The DSML tag
// names carry a leading space in V4.1 (V4 wrote tool_calls, invoke, parameter).
#pragma once

namespace deepinfer::chat_tags {

inline constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kEos = "<｜end▁of▁sentence｜>";
inline constexpr const char* kSystem = "<｜System｜>";
inline constexpr const char* kUser = "<｜User｜>";
inline constexpr const char* kAssistant = "<｜Assistant｜>";
inline constexpr const char* kThinkStart = "<think>";
inline constexpr const char* kThinkEnd = "</think>";
inline constexpr const char* kDsml = "｜DSML｜";
inline constexpr const char* kCallsName = " calls";
inline constexpr const char* kInvokeName = " invoke";
inline constexpr const char* kParameterName = " parameter";

}  // namespace deepinfer::chat_tags
