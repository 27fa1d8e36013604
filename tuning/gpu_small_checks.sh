# Every catalog kernel checked on the GPU at its small sizes, default variant and (where
# there are host loops) device steps: `bash tuning/gpu_small_checks.sh` with OUT set
# (AFTER=NAME resumes after catalog entry NAME).
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD
python - <<'PY' > $OUT/gpu_small_checks.txt 2>&1
import json, subprocess, sys
cat = json.load(open("kernels/catalog.json"))
ok = bad = 0
import os
after = os.environ.get("AFTER", "")  # resume: only the kernels named after this one
for name, e in sorted(cat.items()):
    if name <= after:
        continue
    for label, extra in (("default", []), ("device-steps", ["--variant", '{"device_steps": true}'])):
        args = [sys.executable, "-m", "polygpu", "check", f"kernels/{name}", "-f", e["function"], "--backend", "gpu", "--seed", "5"]
        for k, v in e["small"].items():
            args += ["-p", f"{k}={v}"]
        r = subprocess.run(args + extra, capture_output=True, text=True)
        line = [l for l in (r.stdout + r.stderr).splitlines() if "warning" not in l and l.strip() and "^" not in l and "tz" not in l and "Remark" not in l and "SourceModule" not in l]
        if label == "device-steps" and r.returncode == 2 and "device_steps" in r.stderr:
            continue  # no host loops: nothing to run on the device
        verdict = "ok" if r.returncode == 0 else f"FAIL rc={r.returncode}"
        ok += r.returncode == 0; bad += r.returncode != 0
        print(f"{name} [{label}] {verdict}: {line[-1] if line else ''}", flush=True)
print(f"TOTAL ok={ok} fail={bad}")
PY
tail -5 $OUT/gpu_small_checks.txt; grep FAIL $OUT/gpu_small_checks.txt | head -20
