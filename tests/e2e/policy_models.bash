# The two scripted models of the campaign tests: tests/campaign/policy_model.py serving an "expert" and a
# "weak" policy on a local port. policy_models_start starts it (SERVER_PID; the caller kills it in its
# exit trap), waits for its port (PORT) and writes "$WORK/models.toml" naming both models.
policy_models_start() {
  "$PY" "$D2K_ROOT/tests/campaign/policy_model.py" "$D2K_ROOT" "$WORK/port" "$WORK/requests.jsonl" &
  SERVER_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  PORT=$(cat "$WORK/port")
  cat > "$WORK/models.toml" <<TOML
[models.expert]
provider = "openai"
base_url = "http://127.0.0.1:$PORT/a/v1"
model = "scripted-expert"
prices = { input = 1.0, output = 4.0 }
max_tokens = 1000

[models.weak]
provider = "openai"
base_url = "http://127.0.0.1:$PORT/b/v1"
model = "scripted-weak"
prices = { input = 0.5, output = 2.0 }
max_tokens = 1000
TOML
}
