"""Bridle's resident LoRA trainer: GRPO steps with torch + PEFT, exactly once per (run, step)."""
