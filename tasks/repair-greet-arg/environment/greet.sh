#!/usr/bin/env bash
# Usage: bash greet.sh NAME
name="$2"
echo "Hello, $name"
