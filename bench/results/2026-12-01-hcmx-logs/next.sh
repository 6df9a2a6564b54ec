#!/usr/bin/env bash
# NOT RUN (hcmx's call lost it to a stale flash_layers object): the Engram wkv placement A/B
# (NOTES 55 change 2) and one more hc site round, ~40 s of device time. Pack of a commit with
# flash_layers rebuilt (bench/flash/pack_all.sh), then on the device, carrying .gpubin-hcmx:
#   bash bench/results/2026-12-01-hcmx-logs/next.sh LOG_DIR
set -uo pipefail
PACK=.gpubin-hcmx source bench/flash/device_lib.sh "$1"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers: engram 0,1,2,3 x3 in one process (hc site mode 3)"
flash b1_e 30 $B1 --hc-site 3 --engram-wkv-ab 0,1,2,3 --ab-rounds 3
grep -E "^(engram_wkv_ab|decode_graph)" "$LOG/b1_e.log" | cut -c1-190
st "layers: hc 1,3 x3 in one process (loaded 1)"
flash b1_h 28 $B1 --hc-site 1 --hc-site-ab 1,3 --ab-rounds 3
grep -E "^(hc_site_ab|decode_graph)" "$LOG/b1_h.log" | cut -c1-190
st "done"
