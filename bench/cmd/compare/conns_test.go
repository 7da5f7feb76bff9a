package main

import "testing"

// A CLIENT LIST reply of Redis 7.0 (fields trimmed): two processes of the benchmark, one with
// two shard-channel connections, one with a connection in RESP3 that subscribed and a plain
// one; the watcher's own connection, unnamed; another program's subscriber.
const clientList = `id=3 addr=127.0.0.1:40000 laddr=127.0.0.1:7000 fd=8 name= age=9 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=client|list resp=2
id=4 addr=127.0.0.1:40001 laddr=127.0.0.1:7000 fd=9 name=aqs-bench-11 age=3 idle=0 flags=P db=0 sub=0 psub=0 ssub=2 multi=-1 cmd=ssubscribe resp=3
id=5 addr=127.0.0.1:40002 laddr=127.0.0.1:7000 fd=10 name=aqs-bench-11 age=3 idle=0 flags=P db=0 sub=0 psub=0 ssub=1 multi=-1 cmd=ssubscribe resp=3
id=6 addr=127.0.0.1:40003 laddr=127.0.0.1:7000 fd=11 name=aqs-bench-11 age=3 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=evalsha resp=3
id=7 addr=127.0.0.1:40004 laddr=127.0.0.1:7000 fd=12 name=aqs-bench-12 age=3 idle=0 flags=N db=0 sub=0 psub=0 ssub=1 multi=-1 cmd=ssubscribe resp=3
id=8 addr=127.0.0.1:40005 laddr=127.0.0.1:7000 fd=13 name=aqs-bench-12 age=3 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=set resp=3
id=9 addr=127.0.0.1:40006 laddr=127.0.0.1:7000 fd=14 name=other age=3 idle=0 flags=P db=0 sub=4 psub=0 ssub=0 multi=-1 cmd=subscribe resp=2
`

func TestPubSubByClientCountsSubscribedConnectionsPerProcess(t *testing.T) {
	conns, chans := pubsubByClient(clientList)
	want := map[string][2]int{"aqs-bench-11": {2, 3}, "aqs-bench-12": {1, 1}}
	if len(conns) != len(want) {
		t.Fatalf("pub/sub connections by process %v, want the processes of %v only", conns, want)
	}
	for name, w := range want {
		if conns[name] != w[0] || chans[name] != w[1] {
			t.Errorf("%s: %d pub/sub connections holding %d channels, want %d holding %d", name, conns[name], chans[name], w[0], w[1])
		}
	}
}
