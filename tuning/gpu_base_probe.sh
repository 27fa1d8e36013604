# Sourced by the GPU session scripts that compare this tree with an earlier one in the same
# run: BASE names the earlier commit (its tree in .whl/base_$BASE.tgz, made with `git archive
# $BASE polygpu tuning kernels setup.cfg | gzip`), PROBE_LIMIT each probe's seconds (LIMIT
# overrides it).
[ -n "${PG_INSTALLED:-}" ] || bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD PG_INSTALLED=1
HERE=$PWD
base() { mkdir -p /tmp/base && tar xzf .whl/base_$BASE.tgz -C /tmp/base; }
# probe FILE NAME VARIANTS PARAMS...: the variants with this tree, then with the base tree
probe() { f=$1; name=$2; v=$3; shift 3
  timeout ${LIMIT:-$PROBE_LIMIT} python tuning/variant_probe.py $f "$@" --variants $v --repeats 10 -o $OUT/probe_${name}_new.json 2>&1 | grep -v "^ " | cut -c1-220
  (cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base timeout ${LIMIT:-$PROBE_LIMIT} python tuning/variant_probe.py $f "$@" --variants $HERE/$v --repeats 10 -o $OUT/probe_${name}_base.json 2>&1 | grep -v "^ " | cut -c1-220); }
# lane GPU COMMAND...: COMMAND on GPU i, pinned to its 16 cores where taskset exists
lane() { i=$1; shift; pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
  CUDA_VISIBLE_DEVICES=$i $pin "$@"; }
