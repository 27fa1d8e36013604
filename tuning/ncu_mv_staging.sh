# mv (n = 4096, 32 rows per block, time tile 32): a read from global memory vs staged in
# shared memory without and with the solver's padding, under Nsight Compute.
# Usage (GPU machine): bash tuning/ncu_mv_staging.sh
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__inst_executed.sum
for v in '"shared": false' '"padding": 0' '"padding": -1'; do
  echo "== $v"
  ncu --metrics $M python tuning/traffic_ncu.py --run kernels/mv.c 4096 "{\"tile\":[32],\"threads\":[32],\"time_tile\":32,$v}" 2>&1 | grep -E "^\s+(gpu__|l1tex|sm__|smsp)"
done
