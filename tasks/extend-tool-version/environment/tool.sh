#!/usr/bin/env bash
# Usage: bash tool.sh COMMAND
case "$1" in
  hello)
    echo "hello there"
    ;;
  *)
    echo "unknown command: $1" >&2
    exit 1
    ;;
esac
