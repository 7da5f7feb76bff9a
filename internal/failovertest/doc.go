// Package failovertest holds the tests of aqs across a Redis failover and of the replica-sync
// policy (aqs.WithReplicaSync), on real Sentinel groups (redistest.NewSentinel): how many
// acquisitions a failover loses with and without the policy, and what the policy does when
// replicas do not acknowledge. It has no code of its own.
package failovertest
