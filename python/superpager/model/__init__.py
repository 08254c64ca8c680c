"""The runtime model's tools: `calibrate` (measure this machine's latencies) and `predict`
(run time of a program under each policy, from a trace). docs/RUNTIME_MODEL.md."""
