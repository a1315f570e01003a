#!/usr/bin/env bash
# Compares /app/answer.txt with the expected answer (case and surrounding space ignored).
mkdir -p /logs/verifier
expected="$(tr -d '[:space:]' < /tests/expected.txt | tr '[:upper:]' '[:lower:]')"
got="$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null | tr '[:upper:]' '[:lower:]')"
if [ -n "$got" ] && [ "$got" = "$expected" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
