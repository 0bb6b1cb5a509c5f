// SPDX-License-Identifier: MIT OR Apache-2.0
//
// uet_steer: the XDP program that steers Ultra Ethernet Transport frames into
// AF_XDP sockets and leaves every other frame to the kernel (docs/architecture.md §5).
//
// A frame is UET when
//   - it is UDP (over IPv4 or IPv6) to the configured UET port (config map,
//     default 4793, the IANA port for UET over UDP), or
//   - native-IP UET is enabled (config flag UET_CFG_IP_PROTO) and the IPv4
//     protocol / IPv6 next header equals the configured protocol number
//     (253 by default, an RFC 3692 experimental number).
// A UET frame goes to bpf_redirect_map(&xsks, rx_queue_index, XDP_PASS): the
// AF_XDP socket registered for the receiving queue, or the kernel stack when
// no socket is registered there. Everything else is XDP_PASS, so ARP, ND,
// ping and ssh keep working with the program attached.
//
// Parsing bounds (every header is bounds-checked against data_end before it
// is read; this is what makes the verifier accept the packet accesses):
//   Ethernet  14 bytes, plus at most one 802.1Q (0x8100) or 802.1ad (0x88a8)
//             tag of 4 bytes: the L3 header starts at offset 14 or 18.
//             A second tag (QinQ inner tag) is not parsed: the frame passes.
//   IPv4      version 4, IHL 5..15 (20..60 bytes, options skipped). The IHL
//             is a 4-bit field, so the verifier knows the L4 offset is
//             bounded (18 + 60 at most) and accepts the variable-offset
//             packet pointer once it is compared against data_end.
//             Fragments (MF set or a non-zero offset) pass: a non-first
//             fragment has no UDP header, and a first fragment alone is an
//             incomplete datagram that only the kernel can reassemble.
//   IPv6      the 40-byte fixed header only; next header UDP or the UET
//             protocol number. A frame with extension headers passes (to the
//             kernel, which handles them).
//   UDP       8 bytes; only the destination port is read.
// The deepest read is therefore 18 + 60 + 8 = 86 bytes into the frame.
//
// Multi-buffer frames: the program is frags-aware (section "xdp.frags", loaded
// with BPF_F_XDP_HAS_FRAGS), so a frame larger than a page arrives as a first
// buffer plus fragments (native XDP on veth with an MTU above 3498, jumbo
// frames on a NIC). data..data_end is the first buffer only. The headers are
// read there; when they do not all fit in it (a first buffer shorter than the
// headers, which drivers avoid but need not), the first HDR_COPY (96) bytes
// are copied out with bpf_xdp_load_bytes and parsed from that copy instead.
//
// Counters (per CPU, indexed by enum uet_counter; the loader sums the CPUs):
//   SEEN        every frame the program ran on.
//   REDIRECTED  UET frames for which bpf_redirect_map returned XDP_REDIRECT,
//               i.e. an AF_XDP socket was registered at the frame's queue. A
//               frame the socket then cannot take (RX ring full) is counted
//               by the socket's own XDP_STATISTICS (rx_dropped), not here.
//   PASSED      frames returned XDP_PASS that were parsed fine: non-UET
//               traffic, fragments, IPv6 with extension headers, and UET
//               frames with no socket at their queue.
//   MALFORMED   frames returned XDP_PASS because a header was truncated or
//               invalid (short Ethernet/VLAN/IP/UDP header, IPv4 IHL < 5,
//               IP version not matching the EtherType). The kernel decides.
//   NO_SOCKET   the subset of PASSED that were UET frames with no socket
//               registered at their queue (a queue the daemon does not serve).
// SEEN == REDIRECTED + PASSED + MALFORMED.
//
// Arrival stamp: a UET frame carries, as XDP metadata just in front of its
// data (bpf_xdp_adjust_meta; AF_XDP keeps it in the frame's headroom, in
// copy mode too), a struct uet_rx_meta holding bpf_ktime_get_ns() taken when
// the program started on it. It is when the frame reached the host, before
// it waited in the socket's RX ring for the daemon to run: the daemon times
// its congestion-control delays from it (NSCC's ACK arrival and the
// destination's service time), as a NIC's receive timestamp would be used.
// A driver that refuses metadata leaves the frame without it; the daemon
// then uses the time it read the frame.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define UET_DEFAULT_UDP_PORT 4793
#define UET_CFG_IP_PROTO 0x01 /* config.flags: steer native-IP UET too */

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

/* Mirrors xdp_prog::SteerConfigRaw: 4 bytes, host byte order. */
struct uet_steer_config {
	__u16 udp_port; /* UDP destination port; 0 means the default, 4793 */
	__u8 ip_proto;  /* IP protocol number of native-IP UET */
	__u8 flags;     /* UET_CFG_* */
};

enum uet_counter {
	UET_CNT_SEEN = 0,
	UET_CNT_REDIRECTED = 1,
	UET_CNT_PASSED = 2,
	UET_CNT_MALFORMED = 3,
	UET_CNT_NO_SOCKET = 4,
	UET_CNT_MAX = 5,
};

/* Queue index -> AF_XDP socket, filled by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uet_steer_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UET_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Mirrors xdp_prog::rx_meta: 16 bytes, host byte order, right before the
 * frame's data. */
#define UET_RX_META_MAGIC 0x55455453 /* "UETS" */
struct uet_rx_meta {
	__u64 arrived_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u32 magic;      /* UET_RX_META_MAGIC */
	__u32 reserved;   /* 0 */
};

struct vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

enum verdict {
	VERDICT_PASS,      /* not UET: the kernel's */
	VERDICT_MALFORMED, /* could not be parsed: the kernel's */
	VERDICT_UET,       /* UET: to the AF_XDP socket of this queue */
};

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1; /* per-CPU slot: no atomic needed */
}

static __always_inline enum verdict l4_udp(void *l4, void *data_end, __u16 port)
{
	struct udphdr *udp = l4;

	if ((void *)(udp + 1) > data_end)
		return VERDICT_MALFORMED;
	return bpf_ntohs(udp->dest) == port ? VERDICT_UET : VERDICT_PASS;
}

static __always_inline enum verdict classify(void *data, void *data_end,
					     const struct uet_steer_config *cfg)
{
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;
	__u16 port = cfg->udp_port ? cfg->udp_port : UET_DEFAULT_UDP_PORT;
	int native = cfg->flags & UET_CFG_IP_PROTO;

	if ((void *)(eth + 1) > data_end)
		return VERDICT_MALFORMED;
	proto = eth->h_proto;
	l3 = eth + 1;

	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vlan = l3;

		if ((void *)(vlan + 1) > data_end)
			return VERDICT_MALFORMED;
		proto = vlan->encap_proto;
		l3 = vlan + 1;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		__u32 ihl;

		if ((void *)(ip + 1) > data_end)
			return VERDICT_MALFORMED;
		ihl = ip->ihl;
		if (ip->version != 4 || ihl < 5)
			return VERDICT_MALFORMED;
		/* ihl <= 15, so the options end at most 60 bytes past l3. */
		if (l3 + ihl * 4 > data_end)
			return VERDICT_MALFORMED;
		if (ip->frag_off & bpf_htons(0x3fff)) /* MF | fragment offset */
			return VERDICT_PASS;
		if (ip->protocol == IPPROTO_UDP)
			return l4_udp(l3 + ihl * 4, data_end, port);
		if (native && ip->protocol == cfg->ip_proto)
			return VERDICT_UET;
		return VERDICT_PASS;
	}

	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > data_end)
			return VERDICT_MALFORMED;
		if (ip6->version != 6)
			return VERDICT_MALFORMED;
		if (ip6->nexthdr == IPPROTO_UDP)
			return l4_udp(ip6 + 1, data_end, port);
		if (native && ip6->nexthdr == cfg->ip_proto)
			return VERDICT_UET;
		return VERDICT_PASS; /* other protocols and extension headers */
	}

	return VERDICT_PASS; /* ARP, LLDP, … */
}

/* The most header bytes classify() reads (86), rounded up. */
#define HDR_COPY 96

/* classify() on a copy of the frame's first HDR_COPY bytes, for a frame whose
 * headers straddle its first buffer; VERDICT_MALFORMED when the whole frame is
 * shorter than that (a frame with fragments never is). */
static __noinline enum verdict classify_copy(struct xdp_md *ctx,
					     const struct uet_steer_config *cfg)
{
	__u8 hdr[HDR_COPY];

	if (bpf_xdp_get_buff_len(ctx) < HDR_COPY ||
	    bpf_xdp_load_bytes(ctx, 0, hdr, HDR_COPY))
		return VERDICT_MALFORMED;
	return classify(hdr, hdr + HDR_COPY, cfg);
}

SEC("xdp.frags")
int uet_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct uet_steer_config *cfg;
	__u64 arrived_ns = bpf_ktime_get_ns();
	struct uet_rx_meta *meta;
	enum verdict v;
	long act;

	count(UET_CNT_SEEN);
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg) { /* cannot happen for an ARRAY map; the verifier wants it */
		count(UET_CNT_PASSED);
		return XDP_PASS;
	}

	v = classify(data, data_end, cfg);
	if (v == VERDICT_MALFORMED &&
	    bpf_xdp_get_buff_len(ctx) > (__u64)(data_end - data))
		v = classify_copy(ctx, cfg);
	if (v == VERDICT_MALFORMED) {
		count(UET_CNT_MALFORMED);
		return XDP_PASS;
	}
	if (v == VERDICT_PASS) {
		count(UET_CNT_PASSED);
		return XDP_PASS;
	}

	/* The arrival stamp. Adjusting the metadata invalidates every packet
	 * pointer, so they are loaded again; nothing below reads the packet. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)) == 0) {
		meta = (void *)(long)ctx->data_meta;
		data = (void *)(long)ctx->data;
		if ((void *)(meta + 1) <= data) {
			meta->arrived_ns = arrived_ns;
			meta->magic = UET_RX_META_MAGIC;
			meta->reserved = 0;
		}
	}

	/* The low bits of flags are the action when the slot is empty. */
	act = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (act == XDP_REDIRECT) {
		count(UET_CNT_REDIRECTED);
	} else {
		count(UET_CNT_PASSED);
		count(UET_CNT_NO_SOCKET);
	}
	return act;
}

/* GPL-compatible so the program may use any helper; the file itself is
 * MIT OR Apache-2.0 like the rest of uet. */
char _license[] SEC("license") = "Dual MIT/GPL";
