#!/bin/bash
# hold.sh SECONDS — keep this call (and so the GPU machine, given back 30 s after a call) alive while the
# background training runs, until SECONDS have passed since the calling script started.
limit=${1:-530}
start=$(( $(date +%s) - $(ps -o etimes= -p $PPID | tr -d ' ') ))
while pgrep -f tools/train/train.py >/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do sleep 5; done
echo "hold: $(( $(date +%s) - start )) s; training $(pgrep -f tools/train/train.py >/dev/null && echo running || echo finished)"
tail -3 /tmp/train.log 2>/dev/null
