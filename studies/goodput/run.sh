#!/bin/sh
# Goodput under the longest-gap TBT rule on notebook 08's setting (docs/results/serving.md,
# "Capacity ceiling"): the first 400 conversation requests, M = 10,000 in blocks of 16,
# C = 4,096, hidden cache allowed, TTFT 1 s and TBT 1 s on every gap, target 90%.
# Usage (repository root): OPTSCHED_DATA=/path/to/shared/data sh studies/goodput/run.sh
set -e
T="$OPTSCHED_DATA/traces/AzureLLMInferenceTrace_conv.csv"
OUT=studies/goodput
COMMON="--limit 400 --kv-capacity 10000 --max-batch-tokens 4096 --block-size 16 --hidden-cache \
 --metric ttft-tbt-attainment --ttft-slo 1 --tbt-slo 1 --target 0.9 --rates 0.25:32 --probes 12"
.venv/bin/optsched capacity "$T" $COMMON --policy vllm,aptserve,aptserve-kv-only,slo-park,ttft-first-sr \
    --ceiling --json > $OUT/capacity-nb08.json 2> $OUT/capacity-nb08.log
.venv/bin/optsched capacity "$T" $COMMON --policy slo-park --param tbt_rule=p99 \
    --json > $OUT/capacity-nb08-slo-park-p99.json 2> $OUT/capacity-nb08-slo-park-p99.log
.venv/bin/python -m studies.goodput.slo_park_artefact > $OUT/slo-park-artefact.txt
