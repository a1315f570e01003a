#!/bin/sh
# Bridle's verifier toolchain: the env script uv's installer leaves beside uv, for a test.sh that
# sources "$HOME/.local/bin/env" after installing uv. It puts that folder on PATH.
case ":${PATH}:" in
  *:"$HOME/.local/bin":*) ;;
  *) export PATH="$HOME/.local/bin:$PATH" ;;
esac
