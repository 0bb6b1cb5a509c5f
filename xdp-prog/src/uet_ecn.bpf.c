// SPDX-License-Identifier: MIT OR Apache-2.0
//
// uet_ecn: the lab switch's ECN marker (docs/architecture.md §6). A tc (clsact egress,
// TCX) program on the switch port toward the receiver, the port whose TBF
// qdisc is the bottleneck. The kernel has no RED/fq_codel/netem, so the queue
// is modelled here: a virtual queue drained at R·γ (the bottleneck rate times
// a factor γ, typically 1 or slightly below), and a packet is marked CE with
// bpf_skb_ecn_set_ce when the virtual backlog it finds on arrival is
//   >= KMAX                      always, or
//   in (KMIN, KMAX)              with probability (b - KMIN) / (KMAX - KMIN)
// (KMIN == KMAX gives a step at K). Marking is on only when ECN_FLAG_MARK is
// set; without it the program still tracks the virtual queue (for the lab's
// queue measurements) and counts.
//
// The virtual queue is one number: its virtual finish time F, in picoseconds
// of CLOCK_MONOTONIC (bpf_ktime_get_ns() * 1000, the clock userspace reads
// too). On arrival at time t: F := max(F, t); backlog b := (F - t) / PS,
// where PS = picoseconds per byte at R·γ; then F += len * PS. The max is one
// compare-and-swap and the add one atomic fetch-add, so CPUs running the
// program at the same time never lose bytes (BPF atomics, -mcpu=v3). With
// a LIMIT (the TBF's buffer, bytes) a packet that would overflow it is
// counted as a virtual drop and not added, as the TBF's byte FIFO drops it.
// Lengths are skb->len at tc egress: the Ethernet frame, what TBF counts.
//
// A trimming switch (ECN_FLAG_TRIM): a UET-over-UDP frame that would
// overflow LIMIT is trimmed instead (uet_trim.h: cut to TRIM_TO bytes of
// UDP payload, DSCP TRIM_DSCP) and admitted whatever the backlog, as a
// switch that trims forwards the trimmed packet (there it may take a queue
// of its own, here it waits in the same FIFO). It is not marked, and goes
// out through this port's egress once more (bpf_redirect, skb->mark
// UET_MARK_TRIMMED, which this program and uet_impair let through), so
// that the TBF counts its trimmed length. The lab gives the TBF room
// beyond LIMIT for these small frames, so the TBF drops none of them; any
// other frame that would overflow is dropped here (TC_ACT_SHOT, counted as
// a virtual drop), so that the TBF's larger limit does not admit it.
//
// Config (ARRAY of u64, index enum ecn_cfg; written by uet-lab):
//   PS_PER_BYTE   picoseconds per byte of the drain rate; 0 disables the
//                 virtual queue (and marking): the program only counts SEEN.
//   KMIN, KMAX    thresholds, bytes of virtual backlog.
//   LIMIT         the buffer in bytes; 0 = unbounded.
//   FLAGS         bit 0 (ECN_FLAG_MARK): mark; bit 1 (ECN_FLAG_TRIM): trim
//                 instead of overflowing LIMIT.
//   TRIM_TO       UDP payload bytes a trimmed frame keeps.
//   UDP_PORT      the UET UDP port (0: 4793).
//   TRIM_DSCP     the DSCP of a trimmed frame (0: 16, DSCP_TRIMMED).
// State (ARRAY of u64): [0] = F, picoseconds.
// Counters (ARRAY of u64, atomic adds, index enum ecn_cnt):
//   SEEN       every packet the program ran on (all traffic, not only UET).
//   MARKED     packets set to CE (bpf_skb_ecn_set_ce returned 1; it also
//              returns 1 for a packet already CE).
//   NOT_ECT    packets chosen for marking that are Not-ECT or not IP.
//   VQ_DROPS   packets the virtual queue refused (LIMIT) and did not trim.
//   VQ_PEAK    the largest virtual backlog, bytes, including the packet
//              (a racy max: it may miss a concurrent larger value).
//   VQ_BYTES   bytes admitted to the virtual queue.
//   TRIMMED    frames trimmed for the LIMIT (ECN_FLAG_TRIM).
//   TRIM_ERRORS frames whose trimming failed in a helper (dropped).
// Without ECN_FLAG_TRIM the program never drops or redirects: it returns
// TC_ACT_UNSPEC (TCX_NEXT), so later programs and the qdisc see every
// packet.

#include <linux/pkt_cls.h>

#include "uet_trim.h"

enum ecn_cfg {
	ECN_CFG_PS_PER_BYTE = 0,
	ECN_CFG_KMIN = 1,
	ECN_CFG_KMAX = 2,
	ECN_CFG_LIMIT = 3,
	ECN_CFG_FLAGS = 4,
	ECN_CFG_TRIM_TO = 5,
	ECN_CFG_UDP_PORT = 6,
	ECN_CFG_TRIM_DSCP = 7,
	ECN_CFG_COUNT = 8,
};

#define ECN_FLAG_MARK 0x1
#define ECN_FLAG_TRIM 0x2

enum ecn_cnt {
	ECN_CNT_SEEN = 0,
	ECN_CNT_MARKED = 1,
	ECN_CNT_NOT_ECT = 2,
	ECN_CNT_VQ_DROPS = 3,
	ECN_CNT_VQ_PEAK = 4,
	ECN_CNT_VQ_BYTES = 5,
	ECN_CNT_TRIMMED = 6,
	ECN_CNT_TRIM_ERRORS = 7,
	ECN_CNT_COUNT = 8,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ECN_CFG_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} ecn_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ecn_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ECN_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} ecn_counters SEC(".maps");

static __always_inline __u64 cfg(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&ecn_config, &i);
	return v ? *v : 0;
}

static __always_inline void count(__u32 i, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&ecn_counters, &i);
	if (v)
		__sync_fetch_and_add(v, n);
}

SEC("classifier")
int uet_ecn(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 len = skb->len;
	if ((skb->mark & UET_MARK_MAGIC_MASK) == UET_MARK_TRIMMED) {
		skb->mark = 0; /* the second pass of a frame trimmed below */
		return TC_ACT_UNSPEC;
	}
	count(ECN_CNT_SEEN, 1);

	__u64 ps = cfg(ECN_CFG_PS_PER_BYTE);
	__u64 *f = bpf_map_lookup_elem(&ecn_state, &zero);
	if (ps == 0 || !f)
		return TC_ACT_UNSPEC;

	__u64 now = bpf_ktime_get_ns() * 1000;
	__u64 old = *(volatile __u64 *)f;
	if (old < now)
		__sync_val_compare_and_swap(f, old, now);
	__u64 cur = *(volatile __u64 *)f;
	__u64 backlog = cur > now ? (cur - now) / ps : 0;

	__u64 limit = cfg(ECN_CFG_LIMIT);
	if (limit && backlog + len > limit) {
		__u64 flags = cfg(ECN_CFG_FLAGS);
		__u32 ihl_bytes;
		if (!(flags & ECN_FLAG_TRIM)) {
			count(ECN_CNT_VQ_DROPS, 1);
			return TC_ACT_UNSPEC;
		}
		if (!uet_udp_frame(skb, cfg(ECN_CFG_UDP_PORT), &ihl_bytes)) {
			count(ECN_CNT_VQ_DROPS, 1);
			return TC_ACT_SHOT;
		}
		int r = uet_trim(skb, ihl_bytes, cfg(ECN_CFG_TRIM_TO), cfg(ECN_CFG_TRIM_DSCP));
		if (r < 0) {
			count(ECN_CNT_TRIM_ERRORS, 1);
			return TC_ACT_SHOT;
		}
		/* Trimmed, or no longer than a trimmed frame already: admitted.
		 * A trimmed one goes through the egress again at its new length. */
		len = skb->len;
		__sync_fetch_and_add(f, len * ps);
		count(ECN_CNT_VQ_BYTES, len);
		if (r > 0)
			return TC_ACT_UNSPEC;
		count(ECN_CNT_TRIMMED, 1);
		skb->mark = UET_MARK_TRIMMED;
		return bpf_redirect(skb->ifindex, 0);
	}
	__sync_fetch_and_add(f, len * ps);
	count(ECN_CNT_VQ_BYTES, len);

	__u32 peak_i = ECN_CNT_VQ_PEAK;
	__u64 *peak = bpf_map_lookup_elem(&ecn_counters, &peak_i);
	if (peak && backlog + len > *peak)
		*peak = backlog + len;

	if (!(cfg(ECN_CFG_FLAGS) & ECN_FLAG_MARK))
		return TC_ACT_UNSPEC;
	__u64 kmin = cfg(ECN_CFG_KMIN);
	__u64 kmax = cfg(ECN_CFG_KMAX);
	int mark = 0;
	if (backlog >= kmax) {
		mark = 1;
	} else if (backlog > kmin) {
		/* (b - kmin) / (kmax - kmin) as a 32-bit probability; kmax > b > kmin
		 * here, so the quotient is below 2^32. */
		__u64 p = ((backlog - kmin) << 32) / (kmax - kmin);
		mark = (__u64)bpf_get_prandom_u32() < p;
	}
	if (mark) {
		if (bpf_skb_ecn_set_ce(skb))
			count(ECN_CNT_MARKED, 1);
		else
			count(ECN_CNT_NOT_ECT, 1);
	}
	return TC_ACT_UNSPEC;
}

char _license[] SEC("license") = "Dual MIT/GPL";
