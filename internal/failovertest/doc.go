// Package failovertest holds the tests of aqs across a Redis failover and of the replica-sync
// policy (aqs.WithReplicaSync), on real Sentinel groups (redistest.NewSentinel) and clusters
// with replicas (redistest.NewClusterWithReplicas): how many acquisitions a failover loses
// with and without the policy, what the policy does when replicas do not acknowledge, how soon
// every primitive, an election and its observers included, serves again after each kind of
// failover under load from several processes (serve_test.go), and how the Client follows the
// new master. It has no code of its own.
package failovertest
