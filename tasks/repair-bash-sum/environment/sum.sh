#!/usr/bin/env bash
total=0
while read -r n; do
  total=$((total + n))
done < "$1"
echo "$total"
