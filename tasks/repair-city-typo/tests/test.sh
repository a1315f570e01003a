#!/usr/bin/env bash
# Runs the hidden checks. If they crash (or the code under test kills them), the reward is 0.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.txt
cd /app
python3 /tests/check.py
[ -f /logs/verifier/reward.txt ] || echo 0 > /logs/verifier/reward.txt
