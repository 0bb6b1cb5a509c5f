// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Packet trimming for the lab switch's tc programs (uet_impair, which trims
// at random, and uet_ecn, which trims what would overflow the bottleneck's
// buffer): a UET-over-UDP frame is cut to Ethernet + IPv4 + UDP + keep
// bytes of UDP payload (bpf_skb_change_tail), its IPv4 total length and
// UDP length rewritten, the UDP checksum zeroed (allowed on IPv4) and its
// DSCP set to the trimmed code point, keeping the ECN bits; the IPv4
// header checksum is updated incrementally (bpf_l3_csum_replace). The
// receiver's PDS sees the DSCP and NACKs the packet with UET_TRIMMED
// (docs/protocol-notes.md), so its source resends it after one trip
// through the queue instead of a timeout.
//
// Included by the programs' single sources; the committed objects' stamps
// hash every src/*.h a source includes (tests/committed_object.rs).

#ifndef UET_TRIM_H
#define UET_TRIM_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define UET_DEFAULT_UDP_PORT 4793
#define UET_DSCP_TRIMMED 16

// skb->mark of a frame uet_ecn trimmed and sent through the port's egress
// once more (bpf_redirect), so that the qdisc takes its trimmed length:
// the kernel computes the length a qdisc charges before the tc egress
// hook runs, and a frame trimmed there would still cost a whole packet's
// room and link time in the TBF. Both programs let the second pass
// through; uet_ecn clears the mark.
#define UET_MARK_MAGIC_MASK 0xffff0000u
#define UET_MARK_TRIMMED 0x5e740000u

#define UET_IP_OFF ETH_HLEN
#define UET_IP_CSUM_OFF (UET_IP_OFF + offsetof(struct iphdr, check))
#define UET_IP_TOT_OFF (UET_IP_OFF + offsetof(struct iphdr, tot_len))

// Whether the frame is UET over UDP to `port` (0: the UET port): Ethernet
// without VLAN, IPv4, not a non-first fragment. Sets *ihl_bytes.
static __always_inline int uet_udp_frame(struct __sk_buff *skb, __u16 port, __u32 *ihl_bytes)
{
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) || eth.h_proto != bpf_htons(ETH_P_IP))
		return 0;
	if (bpf_skb_load_bytes(skb, UET_IP_OFF, &ip, sizeof(ip)) || ip.version != 4 || ip.ihl < 5 ||
	    ip.protocol != IPPROTO_UDP)
		return 0;
	if (ip.frag_off & bpf_htons(0x1fff))
		return 0; /* a non-first fragment has no UDP header */
	*ihl_bytes = (__u32)ip.ihl * 4;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + *ihl_bytes, &udp, sizeof(udp)))
		return 0;
	return udp.dest == bpf_htons(port ?: UET_DEFAULT_UDP_PORT);
}

// Trims a frame uet_udp_frame accepted to `keep_payload` bytes of UDP
// payload, marked with `dscp` (0: UET_DSCP_TRIMMED). Returns 0, 1 when the
// frame is no longer than that already, or -1 on a helper failure (the
// frame may then be partly rewritten).
static __always_inline int uet_trim(struct __sk_buff *skb, __u32 ihl_bytes, __u32 keep_payload,
				    __u8 dscp)
{
	__u32 keep = ETH_HLEN + ihl_bytes + sizeof(struct udphdr) + keep_payload;
	if (skb->len <= keep)
		return 1; /* nothing to cut */
	if (bpf_skb_change_tail(skb, keep, 0))
		return -1;

	__u16 w0_old, w0_new; /* version/IHL + TOS, as one 16-bit word */
	if (bpf_skb_load_bytes(skb, UET_IP_OFF, &w0_old, 2))
		return -1;
	__u8 *b = (__u8 *)&w0_new;
	b[0] = ((__u8 *)&w0_old)[0];
	b[1] = ((dscp ?: UET_DSCP_TRIMMED) << 2) | (((__u8 *)&w0_old)[1] & 0x3);
	if (bpf_l3_csum_replace(skb, UET_IP_CSUM_OFF, w0_old, w0_new, 2) ||
	    bpf_skb_store_bytes(skb, UET_IP_OFF, &w0_new, 2, 0))
		return -1;

	__u16 tot_old;
	__u16 tot_new = bpf_htons(keep - ETH_HLEN);
	if (bpf_skb_load_bytes(skb, UET_IP_TOT_OFF, &tot_old, 2) ||
	    bpf_l3_csum_replace(skb, UET_IP_CSUM_OFF, tot_old, tot_new, 2) ||
	    bpf_skb_store_bytes(skb, UET_IP_TOT_OFF, &tot_new, 2, 0))
		return -1;

	__u32 udp_off = ETH_HLEN + ihl_bytes;
	__u16 ulen = bpf_htons(sizeof(struct udphdr) + keep_payload);
	__u16 zero = 0;
	if (bpf_skb_store_bytes(skb, udp_off + offsetof(struct udphdr, len), &ulen, 2, 0) ||
	    bpf_skb_store_bytes(skb, udp_off + offsetof(struct udphdr, check), &zero, 2, 0))
		return -1;
	return 0;
}

#endif
