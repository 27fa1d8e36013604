# Shared by the GPU session scripts (tuning/gpu_session_calls_*.sh, from 2026-11-30): the
# wheels installed, and run(), which runs tuning/batched.py into $OUT/NAME under a time
# limit and prints what a device call's output tail should show: the table rows, the
# JSON lines of each size as it finished, the log's last lines; and tri(), the same for
# tuning/triangular.py on plans built off the device (build/built/NAME.pkl[.gz]).
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
run() {  # $1: name, $2: timeout, rest: tuning/batched.py arguments
  name=$1; limit=$2; shift 2; mkdir -p $OUT/$name
  timeout $limit python tuning/batched.py "$@" --out $OUT/$name > $OUT/log_$name.txt 2>&1
  grep -h "^| \(gemm\|gemv\|dot\|cholesky\)" $OUT/$name/batched.md; grep '^{' $OUT/log_$name.txt | cut -c1-900
  tail -2 $OUT/log_$name.txt | cut -c1-300
}
tri() {  # $1: name, $2: timeout, rest: tuning/triangular.py arguments
  # (plans may come gzipped, build/built/NAME.pkl.gz: three of them fill the 64 MiB
  # that a device call carries)
  name=$1; limit=$2; shift 2
  [ -f build/built/$name.pkl.gz ] && gunzip -f build/built/$name.pkl.gz
  timeout $limit python tuning/triangular.py --no-default --no-mm "$@" \
    --built build/built/$name.pkl --out $OUT --tag $name > $OUT/$name.log 2>&1
  grep '^|' $OUT/$name.log | grep -v "^|---"; tail -1 $OUT/$name.log | cut -c1-300
}
