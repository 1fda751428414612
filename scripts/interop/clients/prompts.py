"""Writes the fixed prompt set every load client of scripts/interop/clients/ sends.

Usage: python3 prompts.py OUT_DIR [N]

Writes, for the same N prompts (default 32), about 90 words (~100-120
SmolLM2 tokens) each, deterministic (no randomness):
  OUT_DIR/prompts.jsonl  {"prompt": "..."}   GuideLLM (json_file: its
                         "prompt" column) and afm-bench (--prompts FILE)
  OUT_DIR/aiperf.jsonl   {"text": "..."}     AIPerf (--custom-dataset-type
                         single_turn)
Standard library only.
"""

import json
import os
import sys

TOPICS = [
    "a lighthouse keeper", "a river delta", "a bakery at dawn", "an old clock",
    "a mountain railway", "a city library", "a winter harbour", "a desert garden",
    "a jazz quartet", "a paper kite", "a fishing village", "a night market",
    "a glass workshop", "an orchard in autumn", "a lost umbrella", "a tram depot",
]

CONTEXT = (
    "Keep the tone warm and concrete, and use plain words. The reader is a "
    "curious ten-year-old who likes details about how things work, what people "
    "do all day, and what the place sounds and smells like. Mention one small "
    "surprise near the end, and avoid lists, headings and dialogue. Do not "
    "explain what you are doing; just write the text itself in the present "
    "tense, starting with the most striking image."
)


def prompt(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"Request {i + 1}. Write a short descriptive paragraph about {topic}. "
        f"{CONTEXT} Variation {i // len(TOPICS) + 1}: focus on the "
        f"{['morning', 'evening', 'rainy day', 'busiest hour'][i % 4]}."
    )


def main() -> None:
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "prompts.jsonl"), "w") as a, open(
        os.path.join(out, "aiperf.jsonl"), "w"
    ) as b:
        for i in range(n):
            a.write(json.dumps({"prompt": prompt(i)}) + "\n")
            b.write(json.dumps({"text": prompt(i)}) + "\n")


if __name__ == "__main__":
    main()
