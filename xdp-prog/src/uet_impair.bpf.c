// SPDX-License-Identifier: MIT OR Apache-2.0
//
// uet_impair: fault injection on the lab switch (docs/architecture.md §6), a tc program
// on the clsact egress (TCX) of every switch port, ahead of uet_ecn. It acts
// only on UET frames (Ethernet + IPv4, no VLAN, UDP to the configured port);
// ARP, ping and everything else pass untouched. All settings are 0 (off)
// until uetd::lab writes the config map, and can be changed at any time.
//
// Per UET frame, in this order, each with its own probability (u64 in the
// config, scaled by 2^32: 2^32 = always; compared to bpf_get_prandom_u32()):
//   LOSS     the frame is dropped (TC_ACT_SHOT).
//   DUP      a copy goes out first: bpf_clone_redirect to this same port's
//            egress; the copy carries skb->mark MARK_DUP so that this
//            program lets it through untouched when it runs on it.
//   REORDER  the frame takes a detour: bpf_redirect to the DETOUR veth, whose
//            peer's ingress (program uet_detour) redirects it back to this
//            port's egress. The detour goes through the kernel's per-CPU
//            backlog queue, so the frames queued there when it was sent
//            overtake it: reordering by a few to a few dozen packets, decided
//            by the kernel's batching, not by a configurable delay (the
//            kernel has no netem, and EDT needs the absent fq qdisc). The
//            port is carried in skb->mark (kept across veth inside one
//            namespace; scrubbed when a frame leaves for a host).
//   TRIM     the frame is trimmed to Ethernet + IP + UDP + TRIM_TO payload
//            bytes and marked with TRIM_DSCP (default 16, the UET spec's
//            DSCP_TRIMMED): uet_trim() in uet_trim.h.
//
// Config (ARRAY of u64, index enum imp_cfg): LOSS, DUP, REORDER, TRIM
// (probabilities as above), TRIM_TO (bytes of UDP payload kept), UDP_PORT
// (0 = 4793), IFINDEX (act only on this port's egress; 0 = every port),
// DETOUR (ifindex of the detour veth; 0 = reordering off), TRIM_DSCP
// (0 = 16).
// Counters (ARRAY of u64, atomic adds, index enum imp_cnt):
//   SEEN      UET frames the program considered (not the copies or the
//             frames coming back from the detour).
//   DROPPED, DUPLICATED, DETOURED, TRIMMED: what it did.
//   RETURNED  frames back from the detour (sent on, out of order).
//   ERRORS    helper failures (the frame then goes on unchanged).

#include <linux/pkt_cls.h>

#include "uet_trim.h"

#define MARK_MAGIC_MASK UET_MARK_MAGIC_MASK
#define MARK_DUP 0x5e710000u
#define MARK_DETOUR 0x5e720000u /* | ifindex of the port to return to */
#define MARK_RETURNED 0x5e730000u

enum imp_cfg {
	IMP_CFG_LOSS = 0,
	IMP_CFG_DUP = 1,
	IMP_CFG_REORDER = 2,
	IMP_CFG_TRIM = 3,
	IMP_CFG_TRIM_TO = 4,
	IMP_CFG_UDP_PORT = 5,
	IMP_CFG_IFINDEX = 6,
	IMP_CFG_DETOUR = 7,
	IMP_CFG_TRIM_DSCP = 8,
	IMP_CFG_COUNT = 9,
};

enum imp_cnt {
	IMP_CNT_SEEN = 0,
	IMP_CNT_DROPPED = 1,
	IMP_CNT_DUPLICATED = 2,
	IMP_CNT_DETOURED = 3,
	IMP_CNT_RETURNED = 4,
	IMP_CNT_TRIMMED = 5,
	IMP_CNT_ERRORS = 6,
	IMP_CNT_COUNT = 7,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IMP_CFG_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} imp_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IMP_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} imp_counters SEC(".maps");

static __always_inline __u64 cfg(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&imp_config, &i);
	return v ? *v : 0;
}

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&imp_counters, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline int chance(__u32 i)
{
	__u64 p = cfg(i);
	return p && (__u64)bpf_get_prandom_u32() < p;
}

SEC("classifier")
int uet_impair(struct __sk_buff *skb)
{
	__u32 mark = skb->mark;
	if ((mark & MARK_MAGIC_MASK) == MARK_DUP) {
		skb->mark = 0;
		return TC_ACT_UNSPEC;
	}
	if ((mark & MARK_MAGIC_MASK) == MARK_RETURNED) {
		skb->mark = 0;
		count(IMP_CNT_RETURNED);
		return TC_ACT_UNSPEC;
	}
	if ((mark & MARK_MAGIC_MASK) == UET_MARK_TRIMMED)
		return TC_ACT_UNSPEC; /* uet_ecn's second pass (uet_trim.h) */

	__u64 only = cfg(IMP_CFG_IFINDEX);
	if (only && only != skb->ifindex)
		return TC_ACT_UNSPEC;

	__u32 ihl_bytes;
	if (!uet_udp_frame(skb, cfg(IMP_CFG_UDP_PORT), &ihl_bytes))
		return TC_ACT_UNSPEC;
	count(IMP_CNT_SEEN);

	if (chance(IMP_CFG_LOSS)) {
		count(IMP_CNT_DROPPED);
		return TC_ACT_SHOT;
	}
	if (chance(IMP_CFG_DUP)) {
		skb->mark = MARK_DUP;
		if (bpf_clone_redirect(skb, skb->ifindex, 0))
			count(IMP_CNT_ERRORS);
		else
			count(IMP_CNT_DUPLICATED);
		skb->mark = 0;
	}
	__u64 detour = cfg(IMP_CFG_DETOUR);
	if (detour && skb->ifindex <= 0xffff && chance(IMP_CFG_REORDER)) {
		skb->mark = MARK_DETOUR | skb->ifindex;
		count(IMP_CNT_DETOURED);
		return bpf_redirect(detour, 0);
	}
	if (chance(IMP_CFG_TRIM)) {
		int r = uet_trim(skb, ihl_bytes, cfg(IMP_CFG_TRIM_TO), cfg(IMP_CFG_TRIM_DSCP));
		if (r == 0)
			count(IMP_CNT_TRIMMED);
		else if (r < 0)
			count(IMP_CNT_ERRORS);
	}
	return TC_ACT_UNSPEC;
}

// On the ingress of the detour veth's peer: sends a detoured frame back to
// the egress of the port it came from; anything else on the detour (IPv6
// router solicitations and the like) is dropped.
SEC("classifier")
int uet_detour(struct __sk_buff *skb)
{
	__u32 mark = skb->mark;
	if ((mark & MARK_MAGIC_MASK) != MARK_DETOUR)
		return TC_ACT_SHOT;
	skb->mark = MARK_RETURNED;
	return bpf_redirect(mark & 0xffff, 0);
}

char _license[] SEC("license") = "Dual MIT/GPL";
