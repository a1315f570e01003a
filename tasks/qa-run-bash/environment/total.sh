#!/usr/bin/env bash
sum=0
for n in $(seq 3 3 30); do
  sum=$((sum + n))
done
echo "$sum"
