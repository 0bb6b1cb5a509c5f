//! Topologies for scenarios: one switch (incast, point to point) and a
//! leaf–spine with `k` spines where ECMP picks the spine by the packet's
//! entropy value (§6: a stable EV→path mapping).

use core::net::{IpAddr, Ipv4Addr};

use crate::fabric::{Fabric, FrameOps, Host, LinkParams, NodeId, PortId};

/// Address of host `i` (10.0.x.y, never .0).
#[must_use]
pub fn host_addr(i: usize) -> IpAddr {
    let n = i + 1;
    IpAddr::V4(Ipv4Addr::new(10, 0, (n / 250) as u8, (n % 250 + 1) as u8))
}

/// What a builder made.
#[derive(Debug, Clone)]
pub struct Built {
    /// The hosts, in order, with their addresses.
    pub hosts: Vec<(NodeId, IpAddr)>,
    /// Every switch.
    pub switches: Vec<NodeId>,
    /// For each host, the switch port that delivers to it (its downlink):
    /// the bottleneck of an incast towards that host.
    pub downlinks: Vec<PortId>,
    /// Leaf-to-spine ports (empty for a single switch).
    pub uplinks: Vec<PortId>,
}

/// All hosts on one switch; host links use `link` both ways.
pub fn single_switch<O: FrameOps>(
    f: &mut Fabric<O>,
    hosts: Vec<Box<dyn Host>>,
    link: &LinkParams,
) -> Built {
    let sw = f.add_switch();
    let mut b = Built {
        hosts: vec![],
        switches: vec![sw],
        downlinks: vec![],
        uplinks: vec![],
    };
    for (i, h) in hosts.into_iter().enumerate() {
        let a = host_addr(i);
        let id = f.add_host(h, a, sw, link.clone(), link.clone());
        b.downlinks
            .push(f.port_towards(sw, a).unwrap_or(PortId(usize::MAX)));
        b.hosts.push((id, a));
    }
    b
}

/// `leaves` leaf switches, each with `per_leaf` hosts, joined by `spines`
/// spine switches (full bipartite). Host links use `host_link`, fabric
/// links `fabric_link`.
pub fn leaf_spine<O: FrameOps>(
    f: &mut Fabric<O>,
    mut hosts: Vec<Box<dyn Host>>,
    leaves: usize,
    spines: usize,
    host_link: &LinkParams,
    fabric_link: &LinkParams,
) -> Built {
    let per_leaf = hosts.len().div_ceil(leaves.max(1));
    let leaf_ids: Vec<NodeId> = (0..leaves).map(|_| f.add_switch()).collect();
    let spine_ids: Vec<NodeId> = (0..spines).map(|_| f.add_switch()).collect();
    let mut b = Built {
        hosts: vec![],
        switches: leaf_ids.iter().chain(&spine_ids).copied().collect(),
        downlinks: vec![],
        uplinks: vec![],
    };
    // Spine → leaf ports, per spine per leaf.
    let mut down: Vec<Vec<PortId>> = vec![vec![]; spines];
    let mut up: Vec<Vec<PortId>> = vec![vec![]; leaves];
    for (l, leaf) in leaf_ids.iter().enumerate() {
        for (s, spine) in spine_ids.iter().enumerate() {
            let (lu, sd) = f.connect(*leaf, *spine, fabric_link.clone());
            up[l].push(lu);
            down[s].push(sd);
            b.uplinks.push(lu);
        }
    }
    for (i, h) in hosts.drain(..).enumerate() {
        let leaf = i / per_leaf.max(1);
        let a = host_addr(i);
        let id = f.add_host(h, a, leaf_ids[leaf], host_link.clone(), host_link.clone());
        b.downlinks.push(
            f.port_towards(leaf_ids[leaf], a)
                .unwrap_or(PortId(usize::MAX)),
        );
        b.hosts.push((id, a));
        for (s, spine) in spine_ids.iter().enumerate() {
            f.add_route(*spine, a, vec![down[s][leaf]]);
        }
    }
    for (l, leaf) in leaf_ids.iter().enumerate() {
        f.set_default_route(*leaf, up[l].clone());
    }
    b
}
