#!/usr/bin/env bash
# Runs the hidden checks with node: all must pass for a reward of 1.
mkdir -p /logs/verifier
cd /app
if node /tests/check.js; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
