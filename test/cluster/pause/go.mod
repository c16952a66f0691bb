// The pause program of test/cluster (standard library only).
module gatehouse.dev/test/cluster/pause

go 1.26.0
