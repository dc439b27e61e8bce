#!/bin/sh
# Goodput under the longest-gap TBT rule on notebook 08's setting (docs/results/serving.md,
# "Capacity ceiling"): the first 400 conversation requests, M = 10,000 in blocks of 16,
# C = 4,096, hidden cache allowed, TTFT 1 s and TBT 1 s on every gap, target 90%.
# Usage (repository root): OPTSCHED_DATA=/path/to/shared/data sh studies/goodput/run.sh
# The runs are independent; they go in parallel (the Python simulator of aptserve is slow).
T="$OPTSCHED_DATA/traces/AzureLLMInferenceTrace_conv.csv"
OUT=studies/goodput
COMMON="--limit 400 --kv-capacity 10000 --max-batch-tokens 4096 --block-size 16 --hidden-cache \
 --metric ttft-tbt-attainment --ttft-slo 1 --tbt-slo 1 --target 0.9 --rates 0.25:32 --probes 12 --json"
cap() {  # cap NAME ARGS...: one capacity run into OUT/capacity-NAME.{json,log}
    name=$1; shift
    .venv/bin/optsched capacity "$T" $COMMON "$@" > $OUT/capacity-$name.json 2> $OUT/capacity-$name.log
}
cap paper --policy vllm,aptserve-kv-only &
cap aptserve --policy aptserve &
cap ours --policy slo-park,ttft-first-sr &
cap slo-park-p99 --policy slo-park --param tbt_rule=p99 &
.venv/bin/python -m studies.goodput.ceiling_nb08 > $OUT/ceiling-nb08.txt &
wait
.venv/bin/python -m studies.goodput.slo_park_artefact > $OUT/slo-park-artefact.txt
