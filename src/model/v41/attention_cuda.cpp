// Attention (MODEL_V41.md §3) with the compressed branch (§4) and the indexer (§5) of
// the CUDA model: CudaModel::Impl members (model_cuda_impl.h), split from model_cuda.cpp.
#include "model/v41/model_cuda_impl.h"

namespace deepinfer::v41 {

// ---------------------------------------------------------------------------
// Attention (§3) with the compressed branch (§4).
// ---------------------------------------------------------------------------

void CudaModel::Impl::attention(Batch& b, int64_t l, const float* x, float* out) {
  const ModelConfig& c = cfg;
  const DAttn& a = layers[l].attn;
  const int64_t n = b.n, hd = c.head_dim, heads = c.num_attention_heads, rd = c.qk_rope_head_dim;
  const int64_t ratio = c.compress_ratios[l], win = c.sliding_window;
  const float* inv_freq = ratio > 0 ? compress_inv_freq : main_inv_freq;
  const float af = float(c.rope_for(l).attention_factor), caf = float(c.compress_rope.attention_factor);
  const float eps = float(c.rms_norm_eps);

  float* qr = layer_arena->alloc<float>(n * c.q_lora_rank);
  float* q = layer_arena->alloc<float>(n * heads * hd);
  float* kv = layer_arena->alloc<float>(n * hd);
  const bool go = launching();

  // Pass 1 (below): every item's compressor, then one batched write of all items' new
  // compressed entries (and, at index sources, their index keys), then the batched
  // indexer, whose selections stay on the device.
  const bool kv_source = ratio > 0 && c.is_kv_source(l), index_source = ratio > 0 && c.is_index_source(l);
  // side (src_chain in a graph step's branch, NOTES 54): what no later kernel of the chain
  // reads -- the compressor's pending-row copy and the stored entry's norm_rope_quant -- on
  // aux3, after the latent's norm (ev_lat), beside the key's gemv and norm_rope_quant and the
  // indexer on aux; the main stream joins aux3 (ev_side) with aux.
  bool side_used = false;
  auto compress_part = [&](bool side) {
    if (!kv_source) return;
    const int64_t ihd = c.index_head_dim;
    std::vector<float*> entry_dst, key_dst;
    std::vector<int64_t> gpos;
    std::vector<size_t> gitem;
    float* lat = nullptr;
    PendingCopy pend;
    compressor(b, l, x, lat, gpos, gitem, side ? &pend : nullptr);
    if (go) trace("comp_latent", l, lat, int64_t(gpos.size()) * hd * int64_t(sizeof(float)));
    // The deferred pending copy (or, with no group row to wait for, issued here: eager).
    auto pending_copy = [&] {
      if (pend.count > 0) copy_rows(pend.src, pend.dst, hd, pend.count);
    };
    for (size_t g = 0; g < gpos.size(); ++g) {
      const size_t i = gitem[g];
      LayerSlot& st = slot_of(b, i).layers[l];
      DI_CHECK(gpos[g] / ratio == st.num_entries, "compressed history out of order at layer ", l);
      entry_dst.push_back(entry(b, i, l, ratio, st.num_entries, false));
      if (index_source) key_dst.push_back(entry(b, i, l, ratio, st.num_entries, true));
      ++st.num_entries;
    }
    for (Shared& sh : b.shared) {
      sh.compress_source = l;
      if (index_source) sh.index_source = l;
    }
    b.compress_source = l;
    // A graph step runs the group rows of every row of the bucket (a decode token
    // completes at most one group); rows past the real groups write dump_row.
    const int64_t real_groups = int64_t(gpos.size());
    const int64_t groups = gp != nullptr ? n : real_groups;
    DI_CHECK(real_groups <= groups, "graph step: ", real_groups, " compressed groups for ", groups, " rows");
    if (groups > 0) {
      // The stored entry is the RoPE-rotated, FP4-rounded latent; the keys derive from
      // the unrotated latent, rotated to the group's first position.
      const int64_t* d_gpos = upload(gpos, *layer_arena, groups, 0);
      float* rotated = layer_arena->alloc<float>(groups * hd);
      // copy + RoPE + FP4 (e4m3 scales) in one launch, lat read once. With src_chain the
      // launch also writes each row to its history entry (copy_to; a graph's padding rows
      // to dump_row, where the copy wrote zero_row's), which copy_rows did after it.
      std::vector<const float*> src(static_cast<size_t>(real_groups));
      if (src_chain) {
        DI_CHECK(gp == nullptr || std::max(hd, ihd) <= pad_dim, "graph step: rows of ", std::max(hd, ihd),
                 " floats exceed the padding rows");
        kernels::NormRopeQuantArgs nq = nrq_args(lat, rotated, groups, hd, false, nullptr, d_gpos, compress_inv_freq,
                                                 rd, caf, 16, kernels::QuantKind::kFp4E4m3);
        nq.copy_to = upload(entry_dst, *layer_arena, groups, dump_row);
        if (side) {
          if (go) {
            CUDA_CHECK(cudaEventRecord(ev_lat, stream));
            CUDA_CHECK(cudaStreamWaitEvent(aux3, ev_lat, 0));
          }
          Branch br(*this, aux3);
          pending_copy();
          if (go) CUDA_CHECK(kernels::norm_rope_quant(nq, stream));
          if (go) CUDA_CHECK(cudaEventRecord(ev_side, stream));
          side_used = true;
          pend.count = 0;
        } else if (go) {
          CUDA_CHECK(kernels::norm_rope_quant(nq, stream));
        }
      } else {
        norm_rope_quant(lat, rotated, groups, hd, false, nullptr, d_gpos, compress_inv_freq, rd, caf, 16,
                        kernels::QuantKind::kFp4E4m3);
        for (int64_t g = 0; g < real_groups; ++g) src[g] = rotated + g * hd;
        copy_rows(src, entry_dst, hd, groups);
      }
      if (index_source) {
        float* k = layer_arena->alloc<float>(groups * ihd);
        linear(lat, k, groups, a.indexer_wk);
        if (src_chain) {
          kernels::NormRopeQuantArgs nq = nrq_args(k, k, groups, ihd, true, a.indexer_k_norm, d_gpos,
                                                   compress_inv_freq, rd, caf, 32, kernels::QuantKind::kFp4Ue8m0);
          nq.copy_to = upload(key_dst, *layer_arena, groups, dump_row);
          if (go) CUDA_CHECK(kernels::norm_rope_quant(nq, stream));
        } else {
          norm_rope_quant(k, k, groups, ihd, true, a.indexer_k_norm, d_gpos, compress_inv_freq, rd, caf, 32,
                          kernels::QuantKind::kFp4Ue8m0);
          for (int64_t g = 0; g < real_groups; ++g) src[g] = k + g * ihd;
          copy_rows(src, key_dst, ihd, groups);
        }
      }
    }
    pending_copy();  // not deferred (no group row): after the gather, in stream order
  };
  // Concurrent branches (model_cuda_impl.h) in a graph step: the compressor path reads
  // only x, so it runs on the aux stream from the start, beside wq_a / wkv and the
  // norms; the indexer then follows it there once qr is normalized, beside wq_b; pass 2
  // waits for both. Graph steps only: their lists live in the parameter block, where an
  // eager step's go through the pinned stage, whose reuse waits for `stream` alone.
  auto branch_ok = [&](const WeightRef& w) { return w.empty() || branch_linear_ok(n, w); };
  const bool branch = gp != nullptr && overlap_attention_on && (kv_source || index_source) && overlap_rows(n) &&
                      branch_ok(a.compressor_wkv) && branch_ok(a.compressor_wgate) && branch_ok(a.indexer_wk) &&
                      branch_ok(a.indexer_wq_b) && branch_ok(a.indexer_weights_proj);
  // src_chain (NOTES 54): the indexer's weights projection and query on aux2 beside the
  // compressor, which waits for them before the score. Its plan follows compress_part's
  // (the key counts it reads are the compressor's).
  const bool split = branch && src_chain && index_source;
  IndexerRun ir;
  // src_chain2 (NOTES 59): the main stream's wq_b waits for the indexer's score (ev_score),
  // set below once the plan is known to be active.
  bool score_first = false;
  if (branch) {
    if (go) fork_to(aux);
    {
      Branch br(*this, aux);
      compress_part(split);
    }
    if (split) {
      ir = indexer_plan(b, l);
      if (ir.active) {
        if (go) fork_to(aux2);
        Branch br(*this, aux2);
        indexer_weights(ir, x);
      }
    }
  }

  linear2(x, n, qr, a.wq_a, kv, a.wkv);  // both read x: one launch at decode
  // kv norm + RoPE + FP8 fake quantization in one launch (bitwise the three kernels).
  // With DEEPINFER_B1_FUSE it runs in the q norm's launch (kernels::
  // rms_norm_and_norm_rope_quant; both read only the gemv's outputs, so it moves ahead of
  // wq_b), and at decode (one token per item) it also writes each new row into its window
  // ring, which the copy_rows launch below did after the pool copy. Writing it first is
  // safe there: the ring row a token overwrites holds position p - win, outside its window
  // (p - win + 1 .. p), so the pool copies it to a row that no id of this step names.
  const bool b1_fuse = kernels::b1_fuse_for(n);
  const bool ring_in_nrq = b1_fuse && win > 0 && int64_t(b.items->size()) == b.begin.back();
  float* const* ring_rows = nullptr;
  if (ring_in_nrq) {
    std::vector<float*> rows;
    for (size_t i = 0; i < b.items->size(); ++i)
      rows.push_back(window((*b.items)[i].slot, l) + (b.positions[b.begin[i]] % win) * hd);
    DI_CHECK(gp == nullptr || hd <= pad_dim, "graph step: ring rows of ", hd, " floats exceed the padding rows");
    ring_rows = upload(rows, *layer_arena, n, dump_row);
  }
  if (b1_fuse) {
    if (go && n > 0) {
      kernels::NormRopeQuantArgs nq = nrq_args(kv, kv, n, hd, true, a.kv_norm, b.d_positions, inv_freq, rd, af, 32,
                                               kernels::QuantKind::kFp8E4m3);
      nq.copy_to = ring_rows;
      CUDA_CHECK(kernels::rms_norm_and_norm_rope_quant({qr, qr, a.q_norm, n, c.q_lora_rank, eps}, nq, stream));
    }
  } else if (go) {
    gpu::rms_norm({qr, qr, n, c.q_lora_rank, a.q_norm, eps}, stream);
  }
  if (split) {
    score_first = src_chain2 && ir.active && n <= kSourceChainReorderMaxRows;
    if (ir.active) {
      if (go) fork_to(aux2);  // aux2: after its weights projection and qr's norm
      {
        Branch br(*this, aux2);
        indexer_query(ir, b, qr);
        if (go) CUDA_CHECK(cudaEventRecord(ev_q, stream));
      }
      if (go) CUDA_CHECK(cudaStreamWaitEvent(aux, ev_q, 0));
    }
    {
      Branch br(*this, aux);  // aux: after its compressor and aux2's query
      if (ir.active) indexer_select(ir, b, l, score_first ? ev_score : nullptr);
      if (go) CUDA_CHECK(cudaEventRecord(ev_join, stream));
    }
    // src_chain2 (NOTES 59): wq_b after the score, beside the selection's mask / top-k.
    if (go && score_first) CUDA_CHECK(cudaStreamWaitEvent(stream, ev_score, 0));
  } else if (branch) {
    if (go) fork_to(aux);  // aux: after its compressor and qr's norm
    Branch br(*this, aux);
    if (index_source) indexer(b, l, x, qr);
    if (go) CUDA_CHECK(cudaEventRecord(ev_join, stream));
  }
  linear(qr, q, n, a.wq_b);
  if (go) {
    trace("attn_qr", l, qr, n * c.q_lora_rank * int64_t(sizeof(float)));
    trace("attn_q", l, q, n * heads * hd * int64_t(sizeof(float)));
  }
  // Outside the batch-invariant mode small batches take the small-batch attention kernel
  // (a query spread over 128 SMs at n = 1; other sums than the invariant kernels, so the
  // invariant mode never takes it), which also applies q's RoPE and the output's inverse
  // (bitwise the rope launches it replaces).
  const bool small_attention = mode != gpu::LinearMode::kInvariant &&
                               n <= kernels::attention_small_max_n(ops::rounding_of(act) == ops::Activations::kBF16) && hd % 2 == 0;
  if (go && !small_attention) gpu::rope({q, n, heads, hd, rd, b.d_positions, inv_freq, false, af}, stream);
  if (!b1_fuse)
    norm_rope_quant(kv, kv, n, hd, true, a.kv_norm, b.d_positions, inv_freq, rd, af, 32, kernels::QuantKind::kFp8E4m3);

  // The main stream joins the branches (aux, and aux3 when used) before the first launch
  // that reads their outputs. src_chain2 (NOTES 59): after the pool / ring copies below, which
  // read only kv and the ring, so they run beside the selection's top-k (in the r1 layers
  // longer than wq_b) instead of after it.
  const bool late_join = branch && src_chain2;
  auto join_branches = [&] {
    if (go) CUDA_CHECK(cudaStreamWaitEvent(stream, ev_join, 0));
    if (go && side_used) CUDA_CHECK(cudaStreamWaitEvent(stream, ev_side, 0));
  };
  if (branch) {
    if (!late_join) join_branches();
  } else {
    compress_part(false);
    if (index_source) indexer(b, l, x, qr);
  }
  // Pass 2: the KV pool of the whole batch, per item [its window ring | its new
  // entries | room for the distinct compressed entries its queries selected], and the
  // entry lists: the window part built here, the compressed part on the device from
  // the device-resident selections (kernels::build_selection_lists), so an index
  // layer needs no host round trip.
  //
  // A graph step fixes the layout per row of the bucket (one token per item, padding
  // rows as items with nothing): item i's pool rows start at i * (win + 1 + top_k), its
  // flags at i * (entries capacity), its list at i * top_k; the selection path runs
  // whenever a selection can exist (the config decides), with null selections for
  // items that have none, which yields the plain window lists.
  namespace kn = kernels;
  const size_t items = b.items->size();
  const int64_t top_k = c.index_topk;
  const bool graph = gp != nullptr;
  const size_t list_items = graph ? size_t(n) : items;
  const int64_t item_rows = win + 1 + top_k;  // graph: pool rows per item
  int64_t entry_cap = 0;
  if (graph && ratio > 0 && b.compress_source >= 0)
    entry_cap = max_context / sources[source_index(b.compress_source)].ratio + 1;
  std::vector<int64_t> item_info(list_items * kn::kSelItemCols, 0), token_item(size_t(n), 0), item_base(items, 0);
  std::vector<const int64_t*> item_sel(list_items, nullptr);
  int64_t pool_rows = 0, flag_count = 0, list_count = 0, max_entries = 0, max_bound = 0, sel_ids = 0;
  int64_t comp_source = -1;
  bool any_comp = false;
  for (size_t i = 0; i < items; ++i) {
    const Shared& sh = b.shared[i];
    const int64_t cnt = b.count(i);
    const bool use_comp = ratio > 0 && sh.compress_source >= 0 && sh.d_selection != nullptr;
    int64_t nk = 0, bound = 0;
    if (use_comp) {
      DI_CHECK(comp_source < 0 || comp_source == sh.compress_source, "items disagree on the KV source at layer ", l);
      comp_source = sh.compress_source;
      nk = slot_of(b, i).layers[comp_source].num_entries;
      bound = std::min(nk, cnt * top_k);  // distinct selected entries
      if (nk > 0) {
        const auto& table = *(*b.items)[i].block_table;
        const int64_t epb = sources[source_index(comp_source)].epb, need = (nk - 1) / epb + 1;
        DI_CHECK(need <= int64_t(table.size()), "block table does not cover compressed entry ", nk - 1);
        for (int64_t j = 0; j < need; ++j)
          DI_CHECK(table[j] >= 0 && table[j] < num_blocks, "block ", table[j], " is outside the history pool");
      }
      if (!graph) upload_tables(b);
      item_sel[i] = sh.d_selection;
      sel_ids += cnt * top_k;
      any_comp = true;
      DI_CHECK(!graph || (comp_source == b.compress_source && nk < entry_cap && b.selection_made),
               "graph step: compressed entries beyond the bucket's capacity at layer ", l);
    }
    int64_t* info = item_info.data() + i * kn::kSelItemCols;
    item_base[i] = graph ? int64_t(i) * item_rows : pool_rows;
    info[kn::kSelFlagBegin] = graph ? int64_t(i) * entry_cap : flag_count;
    info[kn::kSelEntries] = nk;
    info[kn::kSelCompBase] = item_base[i] + win + cnt;
    info[kn::kSelTableBegin] = use_comp ? b.table_begin[i] : 0;
    info[kn::kSelListBegin] = graph ? int64_t(i) * top_k : list_count;
    info[kn::kSelBound] = bound;
    for (int64_t t = b.begin[i]; t < b.begin[i + 1]; ++t) token_item[t] = int64_t(i);
    pool_rows += win + cnt + bound;
    flag_count += nk;
    list_count += bound;
    max_entries = std::max(max_entries, nk);
    max_bound = std::max(max_bound, bound);
  }
  if (graph) {
    DI_CHECK(b.begin.back() == int64_t(items) && int64_t(items) <= n, "graph step: not a decode batch");
    for (size_t i = items; i < list_items; ++i) {  // padding rows: items with no entries
      int64_t* info = item_info.data() + i * kn::kSelItemCols;
      info[kn::kSelFlagBegin] = int64_t(i) * entry_cap;
      info[kn::kSelCompBase] = int64_t(i) * item_rows + win + 1;
      info[kn::kSelListBegin] = int64_t(i) * top_k;
      token_item[i] = int64_t(i);
    }
    pool_rows = n * item_rows;
    flag_count = n * entry_cap;
    list_count = n * top_k;
    max_entries = entry_cap;
    max_bound = top_k;
    sel_ids = n * top_k;
    // The config decides whether the selection path runs (see above).
    any_comp = ratio > 0 && b.compress_source >= 0 && b.selection_made;
    if (any_comp) {
      upload_tables(b);
      comp_source = b.compress_source;
    }
  }
  float* pool = layer_arena->alloc<float>(pool_rows * hd);
  // The pool's copies: each item's ring rows, then its new rows. In a graph step these
  // depend only on the slot of each row (ring addresses; the pool rows, kv and the
  // padding rows sit at the capture's addresses), so they are keyed lists: built and
  // uploaded again only when the batch's slots change (graph_params.h). At batch 256
  // they are 2 x 33,024 pointers per layer, most of a step's plan.
  auto pool_copies = [&](std::vector<const float*>& src, std::vector<float*>& dst) {
    for (size_t i = 0; i < items; ++i) {
      const int64_t t0 = b.begin[i], cnt = b.count(i), base = item_base[i];
      const float* ring = window((*b.items)[i].slot, l);
      for (int64_t r = 0; r < win; ++r) {
        src.push_back(ring + r * hd);
        dst.push_back(pool + (base + r) * hd);
      }
      for (int64_t k = 0; k < cnt; ++k) {
        src.push_back(kv + (t0 + k) * hd);
        dst.push_back(pool + (base + win + k) * hd);
      }
    }
  };
  std::vector<int64_t> offsets, ids;
  offsets.reserve(size_t(n) + 1);
  offsets.push_back(0);
  ids.reserve(size_t(graph ? n * win : b.begin.back() * win));
  for (size_t i = 0; i < items; ++i) {
    StateSlot& slot = slot_of(b, i);
    const int64_t t0 = b.begin[i], cnt = b.count(i), base = item_base[i];
    const int64_t new_base = base + win;
    const int64_t p0 = b.positions[t0];
    for (int64_t k = 0; k < cnt; ++k) {
      const int64_t p = b.positions[t0 + k];
      // Window: positions max(window start, p - win + 1) .. p inclusive.
      for (int64_t s = std::max<int64_t>(slot.window_start, p - win + 1); s <= p; ++s)
        ids.push_back(s < p0 ? base + s % win : new_base + (s - p0));
      offsets.push_back(int64_t(ids.size()));
    }
  }
  // Padding queries attend to pool row 0 (item 0's ring, always copied).
  for (int64_t t = b.begin.back(); graph && t < n; ++t) {
    ids.push_back(0);
    offsets.push_back(int64_t(ids.size()));
  }
  const int64_t window_ids = graph ? n * win : int64_t(ids.size());
  copy_rows_keyed(pool_copies, hd, n * (win + 1));
  // The new tokens go into the rings after the pool has copied the old contents
  // (stream order). Only an item's last `win` tokens survive in its ring; they land
  // on distinct rows, so one launch writes them all.
  if (!ring_in_nrq) {
    std::vector<const float*> src;
    std::vector<float*> dst;
    for (size_t i = 0; i < b.items->size(); ++i) {
      const int64_t slot_id = (*b.items)[i].slot, t0 = b.begin[i], cnt = b.count(i);
      for (int64_t k = std::max<int64_t>(0, cnt - win); k < cnt; ++k) {
        src.push_back(kv + (t0 + k) * hd);
        dst.push_back(window(slot_id, l) + (b.positions[t0 + k] % win) * hd);
      }
    }
    copy_rows(src, dst, hd, n);
  }
  if (late_join) join_branches();

  const int64_t* d_offsets = nullptr;
  const int64_t* d_ids = nullptr;
  if (!any_comp) {
    d_offsets = upload(offsets, *layer_arena, n + 1, 0);
    d_ids = upload(ids, *layer_arena, window_ids, 0);
  } else {
    if (b.d_bad_selection == nullptr && b.bad_selection_slot != nullptr) {
      b.d_bad_selection = b.bad_selection_slot;  // zeroed by the step start's memset (src_chain2)
    } else if (b.d_bad_selection == nullptr) {
      b.d_bad_selection = step_arena->alloc<int>(1);
      if (go) CUDA_CHECK(cudaMemsetAsync(b.d_bad_selection, 0, sizeof(int), stream));
    }
    const Source& cs = sources[source_index(comp_source)];
    kn::SelectionListArgs sa;
    sa.item_info = upload(item_info, *layer_arena, int64_t(item_info.size()), 0);
    sa.item_sel = upload(item_sel, *layer_arena, int64_t(list_items), nullptr);
    sa.token_item = upload(token_item, *layer_arena, n, 0);
    sa.items = int64_t(list_items);
    sa.n = n;
    sa.top_k = top_k;
    sa.max_entries = max_entries;
    sa.max_bound = max_bound;
    sa.flag_count = flag_count;
    sa.flags = layer_arena->alloc<uint8_t>(std::max<int64_t>(1, flag_count));
    sa.rank = layer_arena->alloc<int32_t>(std::max<int64_t>(1, flag_count));
    sa.list = layer_arena->alloc<int64_t>(std::max<int64_t>(1, list_count));
    sa.count = layer_arena->alloc<int64_t>(int64_t(list_items));  // one per list item (graph: padding rows too)
    sa.entries = cs.entries;
    sa.tables = b.d_tables;
    sa.entries_per_block = cs.epb;
    sa.dim = hd;
    sa.pool = pool;
    sa.w_offsets = upload(offsets, *layer_arena, n + 1, 0);
    sa.w_ids = upload(ids, *layer_arena, window_ids, 0);
    int64_t* d_off = layer_arena->alloc<int64_t>(n + 1);
    int64_t* d_all = layer_arena->alloc<int64_t>(std::max<int64_t>(1, window_ids + sel_ids));
    sa.offsets = d_off;
    sa.ids = d_all;
    sa.bad = b.d_bad_selection;
    sa.one_token_per_item = graph;  // token t is item t: the one-launch lists may run (NOTES 50)
    if (go) CUDA_CHECK(kn::build_selection_lists(sa, stream));
    d_offsets = d_off;
    d_ids = d_all;
  }
  if (go) {
    trace("attn_kv", l, kv, n * hd * int64_t(sizeof(float)));
    // The lists' used part only (offsets[n] ids): the rest of their room is never written.
    if (trace_fnv && gp == nullptr) {
      trace("attn_offsets", l, d_offsets, (n + 1) * int64_t(sizeof(int64_t)));
      int64_t used = 0;
      CUDA_CHECK(cudaMemcpy(&used, d_offsets + n, sizeof(used), cudaMemcpyDeviceToHost));
      trace("attn_ids", l, d_ids, used * int64_t(sizeof(int64_t)));
    }
  }
  float* o = layer_arena->alloc<float>(n * heads * hd);
  if (go) {
    ops::SinkAttentionParams sp{q, pool, d_offsets, d_ids, a.attn_sink, 1.0f / std::sqrt(float(hd)), o, n, heads, hd,
                                ops::rounding_of(act),
                                small_attention ? 1 : 0, small_attention ? b.d_positions : nullptr, inv_freq,
                                small_attention ? rd : 0, af};
    sp.kv_rows = pool_rows;  // the pool's size: the bf16 mode's wgmma path at prefill chunks
    gpu::sink_attention(sp, stream);
  }
  // The values carried RoPE; rotate the output back by the query position.
  if (go && !small_attention) gpu::rope({o, n, heads, hd, rd, b.d_positions, inv_freq, /*inverse=*/true, af}, stream);
  if (go) trace("attn_o", l, o, n * heads * hd * int64_t(sizeof(float)));

  // Grouped low-rank output: group g (heads g*H/G ..) through its own block of wo_a.
  const int64_t groups = c.o_groups, group_in = heads * hd / groups, rank = c.o_lora_rank;
  float* z = layer_arena->alloc<float>(n * groups * rank);
  float* xg = layer_arena->alloc<float>(n * group_in);
  float* zg = layer_arena->alloc<float>(n * rank);
  // One gemv launch over all groups (each block of wo_a rows reads its group's slice of
  // o in place) where the gemv takes the weight: at n <= 8, and at every n in the
  // batch-invariant mode (8-token chunks, as linear's invariant mode), so a row's sums
  // never depend on the batch. Otherwise (n > 8, default mode) one linear per group.
  kernels::LinearArgs ga;
  ga.x = o;
  ga.n = std::min<int64_t>(n, 8);
  ga.w = gpu::to_weight_args(a.wo_a);
  ga.num_rows = groups * rank;
  ga.x_stride = heads * hd;
  ga.x_group_rows = rank;
  ga.x_group_step = group_in;
  ga.path = kernels::LinearPath::kGemv;
  const ops::Activations wo_a_act = ops::activations_for(act, a.wo_a);
  ga.bf16_x = wo_a_act == ops::Activations::kBF16;  // the rounding linear() applies on its paths
  ga.one_kernel = mode == gpu::LinearMode::kInvariant;  // as linear()'s invariant chunks
  // (fp8 mode with an FP8 wo_a: linear() quantizes x per group, which this gemv cannot.)
  const bool grouped = groups * rank <= a.wo_a.rows && kernels::linear_gemv_eligible(ga) &&
                       wo_a_act != ops::Activations::kFP8 && (n <= 8 || mode == gpu::LinearMode::kInvariant);
  for (int64_t t0 = 0; grouped && t0 < n; t0 += 8) {
    ga.x = o + t0 * heads * hd;
    ga.y = z + t0 * groups * rank;
    ga.n = std::min<int64_t>(8, n - t0);
    if (go) CUDA_CHECK(kernels::linear(ga, stream));
  }
  for (int64_t g = 0; !grouped && g < groups; ++g) {
    if (go)
      CUDA_CHECK(cudaMemcpy2DAsync(xg, group_in * sizeof(float), o + g * group_in, heads * hd * sizeof(float),
                                   group_in * sizeof(float), n, cudaMemcpyDeviceToDevice, stream));
    linear(xg, zg, n, a.wo_a, /*row0=*/g * rank, /*rows=*/rank);
    if (go)
      CUDA_CHECK(cudaMemcpy2DAsync(z + g * rank, groups * rank * sizeof(float), zg, rank * sizeof(float),
                                   rank * sizeof(float), n, cudaMemcpyDeviceToDevice, stream));
  }
  linear(z, out, n, a.wo_b);
}

// The compressor of the whole batch: emits the pre-RoPE latents of the groups that
// the items' tokens complete, item after item (device, layer arena), with each group's
// first absolute position and item. Groups starting below an item's write floor are
// already in the (shared) history. One launch per step of the computation for all
// items: the projections over all rows, one row gather of every completed group's
// [pending | new] rows, one pooling, one norm, one copy of the rows left pending.
void CudaModel::Impl::compressor(Batch& b, int64_t l, const float* x, float*& latent, std::vector<int64_t>& group_pos,
                                 std::vector<size_t>& group_item, PendingCopy* defer) {
  const ModelConfig& c = cfg;
  const DAttn& a = layers[l].attn;
  const int64_t n = b.n, hd = c.head_dim, ratio = c.compress_ratios[l], src = source_index(l);
  const bool go = launching();
  float* kvp = layer_arena->alloc<float>(n * hd);
  float* gate = nullptr;
  if (ratio > 1) {
    gate = layer_arena->alloc<float>(n * hd);
    linear2(x, n, kvp, a.compressor_wkv, gate, a.compressor_wgate);
  } else {
    linear(x, kvp, n, a.compressor_wkv);
  }
  // Row r of item i's stream: its pending rows (the group being filled), then its new ones.
  auto row = [&](size_t i, int64_t np, int64_t r, bool g) -> const float* {
    const int64_t slot_id = (*b.items)[i].slot;
    if (r < np) return pending_rows(slot_id, src, g) + r * hd;
    return (g ? gate : kvp) + (b.begin[i] + r - np) * hd;
  };
  struct Plan {
    int64_t np, total, g0, complete;
  };
  std::vector<Plan> plan(b.items->size());
  int64_t groups = 0;
  for (size_t i = 0; i < b.items->size(); ++i) {
    const StateSlot& slot = slot_of(b, i);
    const LayerSlot& st = slot.layers[l];
    Plan& p = plan[i];
    p.np = st.num_pending;
    p.total = p.np + b.count(i);
    p.complete = p.total / ratio;
    p.g0 = 0;
    while (p.g0 < p.complete && st.next_group_position + p.g0 * ratio < slot.write_floor) ++p.g0;
    for (int64_t g = p.g0; g < p.complete; ++g) {
      group_pos.push_back(st.next_group_position + g * ratio);
      group_item.push_back(i);
    }
    groups += p.complete - p.g0;
  }
  // A graph step: one group row per row of the bucket (a decode token completes at
  // most one group), at most one row per item left pending; the lists are padded.
  const int64_t per_row = ratio > 1 ? 2 : 1;
  if (gp != nullptr) {
    DI_CHECK(groups <= n, "graph step: ", groups, " compressed groups for ", n, " rows");
    groups = n;
  }
  latent = layer_arena->alloc<float>(groups * hd);
  // src_chain: the gather, the pooling and the norm in one launch (compress_gather_pool_norm
  // reads the rows in place; no scratch rows).
  const bool fused = src_chain;
  float* cat_kv = ratio > 1 && !fused ? layer_arena->alloc<float>(groups * ratio * hd) : nullptr;
  float* cat_gate = ratio > 1 && !fused ? layer_arena->alloc<float>(groups * ratio * hd) : nullptr;
  std::vector<const float*> gsrc, psrc;
  std::vector<float*> gdst, pdst;
  int64_t gi = 0;
  for (size_t i = 0; i < b.items->size(); ++i) {
    const Plan& p = plan[i];
    const int64_t slot_id = (*b.items)[i].slot;
    for (int64_t g = p.g0; g < p.complete; ++g, ++gi)
      for (int64_t k = 0; k < ratio; ++k) {
        const int64_t r = g * ratio + k;
        gsrc.push_back(row(i, p.np, r, false));
        if (!fused) gdst.push_back(ratio == 1 ? latent + gi * hd : cat_kv + (gi * ratio + k) * hd);
        if (ratio > 1) {
          gsrc.push_back(row(i, p.np, r, true));
          if (!fused) gdst.push_back(cat_gate + (gi * ratio + k) * hd);
        }
      }
    // What stays pending moves to the front of the pending rows. With no group
    // completed, the old pending rows are already in place; otherwise (np < ratio <=
    // used) every row left is a new one, so no pending row is read and written by the
    // same launch.
    const int64_t used = p.complete * ratio;
    for (int64_t r = used; r < p.total; ++r) {
      if (used == 0 && r < p.np) continue;
      DI_CHECK(r >= p.np, "compressor: pending rows overlap at layer ", l);
      psrc.push_back(row(i, p.np, r, false));
      pdst.push_back(pending_rows(slot_id, src, false) + (r - used) * hd);
      if (ratio > 1) {
        psrc.push_back(row(i, p.np, r, true));
        pdst.push_back(pending_rows(slot_id, src, true) + (r - used) * hd);
      }
    }
    LayerSlot& st = slot_of(b, i).layers[l];
    st.num_pending = p.total - used;
    st.next_group_position += used;
  }
  if (fused) {
    DI_CHECK(gp == nullptr || hd <= pad_dim, "graph step: compressor rows of ", hd, " floats exceed the padding rows");
    const float* const* d_rows = upload(gsrc, *layer_arena, n * ratio * per_row, zero_row);
    if (groups > 0 && go)
      CUDA_CHECK(kernels::compress_gather_pool_norm(
          {d_rows, latent, a.compressor_norm, groups, ratio, hd, float(c.rms_norm_eps)}, stream));
  } else {
    copy_rows(gsrc, gdst, hd, n * ratio * per_row);
    if (groups > 0 && ratio > 1 && go)  // softmax-gated pooling of each group's rows, per channel, in fp32
      CUDA_CHECK(kernels::compress_pool({cat_kv, cat_gate, latent, groups, ratio, hd}, stream));
  }
  // After the gather above has read the old pending rows (stream order). At ratio 1 no row
  // is ever left pending (used == total): with src_chain a graph step skips its padding-only
  // launch (zero_row to dump_row).
  DI_CHECK(ratio > 1 || psrc.empty(), "compressor: a pending row at ratio 1, layer ", l);
  if (!(src_chain && ratio == 1)) {
    if (defer != nullptr) {  // the caller copies them later (after the norm below)
      defer->src = std::move(psrc);
      defer->dst = std::move(pdst);
      defer->count = gp != nullptr ? n * per_row : int64_t(defer->src.size());
    } else {
      copy_rows(psrc, pdst, hd, n * per_row);
    }
  }
  if (groups > 0 && go && !fused)
    gpu::rms_norm({latent, latent, groups, hd, a.compressor_norm, float(c.rms_norm_eps)}, stream);
}

void CudaModel::Impl::upload_tables(Batch& b) {
  if (b.tables_ready) return;
  b.tables_ready = true;
  std::vector<int64_t> all;
  b.table_begin.clear();
  for (const CudaBatchItem& it : *b.items) {
    if (gp != nullptr) {  // a graph step: [rows, table_width], enough below max_context
      all.resize(size_t(int64_t(b.table_begin.size()) * table_width), 0);
      b.table_begin.push_back(int64_t(all.size()));
      const size_t keep = std::min<size_t>(it.block_table->size(), size_t(table_width));
      all.insert(all.end(), it.block_table->begin(), it.block_table->begin() + keep);
      continue;
    }
    b.table_begin.push_back(int64_t(all.size()));
    all.insert(all.end(), it.block_table->begin(), it.block_table->end());
  }
  if (all.empty()) all.push_back(0);  // a valid pointer even when no table has blocks
  b.d_tables = upload(all, *step_arena, b.n * table_width, 0);
}

// The index layer of the whole batch: every query row of every item scores its own
// item's keys (read in place from the paged history through the block tables) and
// selects its top-k, one launch per kernel; the selections stay on the device, where
// attention() turns them into entry lists (no host round trip). Four parts, so a graph
// step can run the query projections beside the compressor (NOTES 54): the host plan,
// the weights projection (reads x), the query (reads qr), the score and the selection.
void CudaModel::Impl::indexer(Batch& b, int64_t l, const float* x, const float* qr) {
  IndexerRun r = indexer_plan(b, l);
  if (!r.active) return;
  indexer_query(r, b, qr);
  indexer_weights(r, x);
  indexer_select(r, b, l);
}

CudaModel::Impl::IndexerRun CudaModel::Impl::indexer_plan(Batch& b, int64_t l) {
  const ModelConfig& c = cfg;
  const int64_t n = b.n, ihd = c.index_head_dim, ih = c.index_n_heads;
  IndexerRun run;
  int64_t key_layer = -1;
  for (const Shared& sh : b.shared) {
    if (sh.index_source < 0) continue;
    DI_CHECK(key_layer < 0 || key_layer == sh.index_source, "items disagree on the index source at layer ", l);
    key_layer = sh.index_source;
  }
  if (key_layer < 0) return run;
  const Source& src = sources[source_index(key_layer)];
  const bool is_candidate_source = l == c.candidate_source_layer_id;
  const bool uses_candidates = c.candidate_source_layer_id >= 0 && c.candidate_source_layer_id < l;
  upload_tables(b);
  const bool graph = gp != nullptr;

  // Row t of the batch is token t. Items without keys yet skip their rows (an earlier
  // selection stays published, as in the per-sequence model). A graph step gives
  // every row key_cap score slots (row t at t * key_cap) and always launches; its
  // padding rows and the items without keys have 0 keys.
  namespace k = kernels;
  const int64_t key_cap = graph ? max_context / src.ratio + 1 : 0;
  std::vector<int64_t> info(size_t(n * k::kRowInfoCols), 0);
  for (int64_t t = 0; t < n; ++t) info[t * k::kRowInfoCols + k::kRowCand] = -1;
  run.active_items.assign(b.items->size(), false);
  int64_t total = 0, max_keys = 0;
  for (size_t i = 0; i < b.items->size(); ++i) {
    Shared& sh = b.shared[i];
    if (sh.index_source < 0) continue;
    const int64_t nk = slot_of(b, i).layers[key_layer].num_entries;
    if (nk == 0) continue;
    const auto& table = *(*b.items)[i].block_table;
    const int64_t need = (nk - 1) / src.epb + 1;
    DI_CHECK(need <= int64_t(table.size()), "block table does not cover index key ", nk - 1);
    for (int64_t j = 0; j < need; ++j)
      DI_CHECK(table[j] >= 0 && table[j] < num_blocks, "block ", table[j], " is outside the history pool");
    if (uses_candidates && sh.cand_begin >= 0)
      DI_CHECK(sh.cand_keys == nk, "candidate mask width mismatch at layer ", l);
    DI_CHECK(!graph || nk < key_cap, "graph step: ", nk, " index keys beyond the bucket's capacity");
    const int64_t row0 = graph ? b.begin[i] * key_cap : total, stride = graph ? key_cap : nk;
    for (int64_t r = 0; r < b.count(i); ++r) {
      int64_t* row = info.data() + (b.begin[i] + r) * k::kRowInfoCols;
      row[k::kRowKeys] = nk;
      row[k::kRowScore] = row0 + r * stride;
      row[k::kRowTable] = b.table_begin[i];
      if (uses_candidates && sh.cand_begin >= 0) row[k::kRowCand] = sh.cand_begin + r * stride;
    }
    if (is_candidate_source) {
      sh.cand_begin = row0;
      sh.cand_keys = nk;
    }
    run.active_items[i] = true;
    total += b.count(i) * nk;
    max_keys = std::max(max_keys, nk);
  }
  if (graph) {
    total = n * key_cap;
    max_keys = key_cap;
  }
  if (total == 0) return run;
  run.active = true;
  run.layer = l;
  run.n = n;
  run.src = &src;
  run.is_candidate_source = is_candidate_source;
  run.uses_candidates = uses_candidates;
  run.total = total;
  run.max_keys = max_keys;
  run.d_info = upload(info, *layer_arena, int64_t(info.size()), 0);
  run.qi = layer_arena->alloc<float>(n * ih * ihd);
  run.w = layer_arena->alloc<float>(n * ih);
  run.scores = layer_arena->alloc<float>(total);
  return run;
}

// The query: wq_b of the indexer on the normalized qr, then RoPE + FP4 (ue8m0 scales) of
// every head in one launch (bitwise the two kernels).
void CudaModel::Impl::indexer_query(const IndexerRun& r, const Batch& b, const float* qr) {
  const ModelConfig& c = cfg;
  const int64_t n = b.n, ihd = c.index_head_dim, ih = c.index_n_heads;
  linear(qr, r.qi, n, layers[r.layer].attn.indexer_wq_b);
  norm_rope_quant(r.qi, r.qi, n * ih, ihd, false, nullptr, b.d_positions, compress_inv_freq, c.qk_rope_head_dim,
                  float(c.compress_rope.attention_factor), 32, kernels::QuantKind::kFp4Ue8m0, ih);
}

// The heads' weights: the projection of x, scaled by 1 / sqrt(heads).
void CudaModel::Impl::indexer_weights(const IndexerRun& r, const float* x) {
  const int64_t ih = cfg.index_n_heads;
  linear(x, r.w, r.n, layers[r.layer].attn.indexer_weights_proj);
  if (launching()) CUDA_CHECK(kernels::scale(r.w, 1.0f / std::sqrt(float(ih)), r.n * ih, stream));
}

void CudaModel::Impl::indexer_select(const IndexerRun& r, Batch& b, int64_t l, cudaEvent_t after_score) {
  const ModelConfig& c = cfg;
  const int64_t n = b.n, ihd = c.index_head_dim, ih = c.index_n_heads, ratio = c.compress_ratios[l];
  const Source& src = *r.src;
  const bool go = launching();
  if (go)
    // Positions: the kernel may skip keys a row cannot see (the selection masks them to -inf).
    gpu::indexer_score_paged({r.qi, r.w, src.keys, b.d_tables, r.d_info, n, ih, ihd, src.epb, r.max_keys,
                              1.0f / std::sqrt(float(ihd)), r.scores, b.d_positions, ratio},
                             stream);
  if (go && after_score != nullptr) CUDA_CHECK(cudaEventRecord(after_score, stream));

  const int64_t top_k = c.index_topk;
  gpu::IndexerSelectBatchParams sp;
  sp.scores = r.scores;
  sp.row_info = r.d_info;
  sp.rows = n;
  sp.max_keys = r.max_keys;
  sp.positions = b.d_positions;
  sp.ratio = ratio;
  sp.top_k = top_k;
  if (r.is_candidate_source) {
    b.candidates = step_arena->alloc<uint8_t>(r.total);  // read by later layers of this step
    sp.candidates_out = b.candidates;
    sp.candidate_topk_blocks = c.candidate_topk_blocks;
    sp.candidate_block_size = c.candidate_block_size;
  } else if (r.uses_candidates) {
    sp.candidates_in = b.candidates;  // rows without a mask have cand_begin -1
  }
  // Read by the attention lists of this and the later layers of the step.
  int64_t* sel = step_arena->alloc<int64_t>(n * (1 + top_k));  // counts [n], then ids [n, top_k]
  sp.counts = sel;
  sp.ids = sel + n;
  if (go) gpu::indexer_select_batch(sp, stream);
  if (go && trace_fnv && gp == nullptr) {
    trace("idx_q", l, r.qi, n * ih * ihd * int64_t(sizeof(float)));
    trace("idx_w", l, r.w, n * ih * int64_t(sizeof(float)));
    // Item 0's keys where its blocks are consecutive (flash_layers' tables), and each row's
    // selection: its count, then only the ids it holds (the rest of the row is never written).
    const auto& t0 = *(*b.items)[0].block_table;
    const int64_t nk0 = slot_of(b, 0).layers[r.src->layer].num_entries, need = nk0 > 0 ? (nk0 - 1) / src.epb + 1 : 0;
    bool consecutive = need <= int64_t(t0.size());
    for (int64_t j = 1; consecutive && j < need; ++j) consecutive = t0[j] == t0[0] + j;
    if (consecutive && nk0 > 0) trace("idx_keys0", l, src.keys + t0[0] * src.epb * ihd, nk0 * ihd * int64_t(sizeof(float)));
    std::vector<int64_t> host(size_t(n * (1 + top_k)));
    CUDA_CHECK(cudaMemcpy(host.data(), sel, host.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
    std::vector<int64_t> used(host.begin(), host.begin() + n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < std::min(host[t], top_k); ++j) used.push_back(host[n + t * top_k + j]);
    trace_host("idx_selection", l, used.data(), int64_t(used.size() * sizeof(int64_t)));
  }
  b.selection_made = true;
  for (size_t i = 0; i < b.items->size(); ++i)
    if (r.active_items[i]) b.shared[i].d_selection = sel;
}

}  // namespace deepinfer::v41
