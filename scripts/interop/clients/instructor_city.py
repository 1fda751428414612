"""`instructor` (structured outputs into pydantic models) against a running
OpenAI-compatible server, in the two modes local-server users pick.

Usage: python instructor_city.py BASE_URL [--model M] [--json FILE]

Checks (temperature 0, seed 7, max_retries 0: the server's first answer
must validate, so the run is deterministic):
  json_schema   Mode.JSON_SCHEMA: response_format {"type": "json_schema"}
  tools         Mode.TOOLS: one tool named City, tool_choice naming it
Each must return a validated City with the name and the population the
prompt states. The server must constrain output with a grammar (afm-serve
--enable-grammar-constraints; on by default since eaf476f).
Prints each check and a closing "N passed, N failed" line; exits 1 if any
check failed.
"""

import argparse
import json
import sys

import instructor
import openai
from openai import OpenAI
from pydantic import BaseModel

TEXT = "Lyon is a city in France. The population of Lyon is 522250 people."


class City(BaseModel):
    name: str
    population: int


def error_text(e):
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        return err.get("message") if isinstance(err, dict) else str(err)
    return str(e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("--model")
    p.add_argument("--json")
    a = p.parse_args()
    raw = OpenAI(base_url=a.base_url.rstrip("/") + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = a.model or raw.models.list().data[0].id
    results = []
    for name, mode in [("json_schema", instructor.Mode.JSON_SCHEMA), ("tools", instructor.Mode.TOOLS)]:
        entry = {"name": name, "ok": False, "status": None, "error": None}
        try:
            client = instructor.from_openai(raw, mode=mode)
            city = client.chat.completions.create(
                model=model,
                response_model=City,
                messages=[
                    {"role": "system", "content": "You extract facts from text."},
                    {"role": "user", "content": f"{TEXT}\nExtract the city's name and population."},
                ],
                temperature=0,
                seed=7,
                max_tokens=64,
                max_retries=0,
            )
            assert isinstance(city, City), type(city)
            assert city.name.strip().lower() == "lyon", f"name {city.name!r}"
            assert city.population == 522250, f"population {city.population}"
            entry.update(ok=True, value=city.model_dump())
            print(f"PASS {name}: {city.model_dump()}", flush=True)
        except Exception as e:  # noqa: BLE001 - any failure fails the check
            cause, seen = e, set()
            while cause is not None and not isinstance(cause, openai.APIStatusError) and id(cause) not in seen:
                seen.add(id(cause))
                cause = cause.__cause__ or cause.__context__
            if isinstance(cause, openai.APIStatusError):
                entry["status"] = cause.status_code
                entry["error"] = f"HTTP {cause.status_code}: {error_text(cause)}"
            else:
                entry["error"] = f"{type(e).__name__}: {str(e)[:600]}"
            print(f"FAIL {name}: {entry['error']}", flush=True)
        results.append(entry)
    passed = sum(r["ok"] for r in results)
    failed = len(results) - passed
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"client": "instructor", "version": instructor.__version__,
                       "openai": openai.__version__, "model": model,
                       "checks": results, "passed": passed, "failed": failed}, f, indent=2)
    if not failed:
        print("all checks passed")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
