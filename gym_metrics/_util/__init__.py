"""Small runtime helpers every layer may use (JSON, unique values, memory, HTTP, registries...).

Nothing here knows the domain; each module is imported on its own, so loading one helper never
loads another's dependencies (httpx, orjson)."""
