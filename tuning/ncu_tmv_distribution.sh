# tmv (n = 4096): cyclic vs blocked thread distribution under Nsight Compute.
# Usage (GPU machine): bash tuning/ncu_tmv_distribution.sh
M=gpu__time_duration.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
for b in false true; do
  echo "== blocked=$b"
  ncu --metrics $M python tuning/traffic_ncu.py --run kernels/tmv.c 4096 "{\"tile\":[128],\"threads\":[32],\"time_tile\":32,\"jam\":true,\"blocked\":$b}" 2>&1 | grep -E "^\s+(gpu__|l1tex|lts|dram|sm__|smsp)" 
done
