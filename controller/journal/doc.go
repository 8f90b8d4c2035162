// Package journal is the node controller's single source of truth on disk: the ENI operations in flight, the
// ENIs in the books, the pod assignments, the cooldown deadlines of released IPs and the IPs our own unassigns
// took in the last minutes (a lagging Describe still lists them).
//
// # Format
//
// One append-only file, encoded and decoded in format.go. Its first line names the format and version
// ("ENIWIRE-JOURNAL v2"); every further line is a record "<crc32c hex> <length> <json>". The first record is
// a snapshot of the whole state; each later one (record.go) is the change one save made (ENIs, IP
// operations, assignments, cooldowns and recent unassigns put or dropped by key) and carries the next
// sequence number. So a pod assignment writes a few hundred bytes whatever the node holds. Replay applies
// records in order and stops at the first that is torn, fails its checksum or breaks the sequence: the state
// is the last good one. When the file passes compactAt it is rewritten as one snapshot: temp file, fsync,
// rename, fsync of the directory.
//
// # Durability
//
// Every save is written with write(2) before Append returns, so it survives any crash of the agent process,
// kill -9 included: the kernel holds the bytes. What a machine crash (power loss, kernel panic) may lose
// depends on what the caller asked for and on the store's SyncPolicy:
//
//   - Durable records (ENI operations, IP operations; every state the ENI commit journals before its EC2
//     call) are fdatasync'd before Commit returns, under either policy. They guard cloud resources that
//     outlive a reboot: an ENI created but not journaled would leak, one attached but not journaled could be
//     deleted under a pod.
//   - Pod records (assignments, releases, expired cooldowns) are fdatasync'd before Commit returns under
//     SyncAlways; under SyncBatched, Commit returns once the record is written and the committer fdatasyncs
//     within BatchInterval. A machine crash that loses the page cache also ends every pod of the node, so
//     the only assignments it can lose are those of pods that no longer exist; after the reboot kubelet
//     runs ADD again for the pods it restarts.
//
// Concurrent commits share one fdatasync (group commit): the first waiter syncs everything written so far,
// the others wait for it and return when their record is covered. An fdatasync error poisons the store:
// every later call fails with ErrBroken, since the kernel may have dropped the dirty pages it could not
// write and a retried sync would lie. The agent must restart and replay.
package journal
