//! Proptest strategies for every SES `Repr` (test builds only).

use proptest::prelude::*;

use crate::types::{JobId, Len14, MessageId, PidOnFep, Psn, ResourceIndex, RiGeneration};

use super::atomic::{AtomicDatatype, AtomicOpcode};
use super::ext::{AtomicExtRepr, CasExtRepr, ExtKind, ExtRepr, RendezvousExtRepr};
use super::opcode::{ListKind, Opcode, ResponseOpcode};
use super::request::{
    HeaderDataOrOffset, MediumRepr, RequestFlags, SmallRepr, SomFields, StandardRepr,
};
use super::response::{ResponseDataRepr, ResponseDataSmallRepr, ResponseRepr};
use super::return_code::ReturnCode;
use super::{SesRepr, StandardRequest};

pub(crate) fn arb_opcode() -> impl Strategy<Value = Opcode> {
    prop_oneof![
        (0u8..64).prop_map(Opcode::from_u8),
        // Bias towards the opcodes that carry extensions.
        prop::sample::select(vec![
            Opcode::Atomic,
            Opcode::FetchingAtomic,
            Opcode::TsendAtomic,
            Opcode::TsendFetchAtomic,
            Opcode::RendezvousSend,
            Opcode::RendezvousTsend,
        ]),
    ]
}

fn arb_flags() -> impl Strategy<Value = RequestFlags> {
    any::<(bool, bool, bool, bool)>().prop_map(|(dc, ie, rel, eom)| RequestFlags {
        dc,
        ie,
        rel,
        eom,
    })
}

/// `ri_generation`, `job_id`, `pid_on_fep`, `resource_index`.
fn arb_ids() -> impl Strategy<Value = (RiGeneration, JobId, PidOnFep, ResourceIndex)> {
    (any::<u8>(), any::<u32>(), any::<u16>(), any::<u16>()).prop_map(|(g, j, p, r)| {
        (
            RiGeneration::from_masked(g),
            JobId::from_masked(j),
            PidOnFep::from_masked(p),
            ResourceIndex::from_masked(r),
        )
    })
}

fn arb_len14() -> impl Strategy<Value = Len14> {
    any::<u16>().prop_map(Len14::from_masked)
}

fn arb_som() -> impl Strategy<Value = SomFields> {
    prop_oneof![
        any::<u64>().prop_map(|header_data| SomFields::Start { header_data }),
        (arb_len14(), any::<u32>()).prop_map(|(payload_length, message_offset)| {
            SomFields::Continuation {
                payload_length,
                message_offset,
            }
        }),
    ]
}

pub(crate) fn arb_standard() -> impl Strategy<Value = StandardRepr> {
    (
        (arb_opcode(), arb_flags(), any::<bool>(), arb_som()),
        (any::<u16>(), arb_ids()),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u32>()),
    )
        .prop_map(
            |(
                (opcode, flags, hd, som),
                (msg, (ri_generation, job_id, pid_on_fep, resource_index)),
                (buffer_offset, initiator, memory_key, request_length),
            )| StandardRepr {
                opcode,
                flags,
                hd,
                som,
                message_id: MessageId::from_masked(msg),
                ri_generation,
                job_id,
                pid_on_fep,
                resource_index,
                buffer_offset,
                initiator,
                memory_key,
                request_length,
            },
        )
}

pub(crate) fn arb_medium() -> impl Strategy<Value = MediumRepr> {
    (
        (arb_opcode(), arb_flags(), any::<bool>(), arb_len14()),
        arb_ids(),
        (any::<bool>(), any::<u64>(), any::<u32>(), any::<u64>()),
    )
        .prop_map(
            |(
                (opcode, flags, som, request_length),
                (ri_generation, job_id, pid_on_fep, resource_index),
                (hd, word, initiator, memory_key),
            )| MediumRepr {
                opcode,
                flags,
                som,
                request_length,
                ri_generation,
                job_id,
                pid_on_fep,
                resource_index,
                data_or_offset: if hd {
                    HeaderDataOrOffset::HeaderData(word)
                } else {
                    HeaderDataOrOffset::BufferOffset(word)
                },
                initiator,
                memory_key,
            },
        )
}

pub(crate) fn arb_small() -> impl Strategy<Value = SmallRepr> {
    (
        (arb_opcode(), arb_flags(), any::<bool>(), arb_len14()),
        arb_ids(),
        any::<u64>(),
    )
        .prop_map(
            |(
                (opcode, flags, som, request_length),
                (ri_generation, job_id, pid_on_fep, resource_index),
                buffer_offset,
            )| SmallRepr {
                opcode,
                flags,
                som,
                request_length,
                ri_generation,
                job_id,
                pid_on_fep,
                resource_index,
                buffer_offset,
            },
        )
}

pub(crate) fn arb_atomic_ext() -> impl Strategy<Value = AtomicExtRepr> {
    (any::<u8>(), any::<u8>(), any::<bool>(), any::<bool>()).prop_map(|(op, dt, c, h)| {
        AtomicExtRepr {
            opcode: AtomicOpcode::from_u8(op),
            datatype: AtomicDatatype::from_u8(dt),
            cacheable: c,
            cpu_coherent: h,
        }
    })
}

pub(crate) fn arb_cas_ext() -> impl Strategy<Value = CasExtRepr> {
    (arb_atomic_ext(), any::<u128>(), any::<u128>()).prop_map(|(atomic, compare, swap)| {
        CasExtRepr {
            atomic,
            compare,
            swap,
        }
    })
}

pub(crate) fn arb_rendezvous_ext() -> impl Strategy<Value = RendezvousExtRepr> {
    (any::<u32>(), arb_ids(), any::<u64>(), any::<u64>()).prop_map(
        |(eager_length, (ri_generation, _, pid_on_fep, resource_index), read_offset, key)| {
            RendezvousExtRepr {
                eager_length,
                ri_generation,
                pid_on_fep,
                resource_index,
                read_offset,
                read_memory_key: key,
            }
        },
    )
}

pub(crate) fn arb_ext() -> impl Strategy<Value = ExtRepr> {
    prop_oneof![
        arb_atomic_ext().prop_map(ExtRepr::Atomic),
        arb_cas_ext().prop_map(ExtRepr::CompareSwap),
        arb_rendezvous_ext().prop_map(ExtRepr::Rendezvous),
    ]
}

const CAS_OPCODES: [AtomicOpcode; 7] = [
    AtomicOpcode::Cswap,
    AtomicOpcode::CswapNe,
    AtomicOpcode::CswapLe,
    AtomicOpcode::CswapLt,
    AtomicOpcode::CswapGe,
    AtomicOpcode::CswapGt,
    AtomicOpcode::Mswap,
];

/// A standard request with the extension its opcode calls for.
pub(crate) fn arb_standard_request() -> impl Strategy<Value = StandardRequest> {
    (
        arb_standard(),
        arb_atomic_ext(),
        arb_cas_ext(),
        arb_rendezvous_ext(),
        any::<bool>(),
        0..CAS_OPCODES.len(),
    )
        .prop_map(|(header, mut atomic, mut cas, rndv, want_cas, i)| {
            let ext = if header.opcode.has_rendezvous_ext() {
                Some(ExtRepr::Rendezvous(rndv))
            } else if header.opcode.has_atomic_ext() {
                if want_cas {
                    cas.atomic.opcode = CAS_OPCODES[i];
                    Some(ExtRepr::CompareSwap(cas))
                } else {
                    if atomic.opcode.is_compare_swap() {
                        atomic.opcode = AtomicOpcode::Sum;
                    }
                    Some(ExtRepr::Atomic(atomic))
                }
            } else {
                None
            };
            debug_assert_eq!(
                ext.as_ref().map(ExtRepr::kind),
                ExtKind::for_request(header.opcode, ext.as_ref().and_then(ExtRepr::atomic_opcode))
            );
            StandardRequest::new(header, ext).unwrap()
        })
}

fn arb_common_rsp() -> impl Strategy<Value = (ListKind, ResponseOpcode, ReturnCode)> {
    (0u8..4, 0u8..64, 0u8..64).prop_map(|(l, o, rc)| {
        (
            ListKind::from_u8(l),
            ResponseOpcode::from_u8(o),
            ReturnCode::from_u8(rc),
        )
    })
}

pub(crate) fn arb_response() -> impl Strategy<Value = ResponseRepr> {
    (
        arb_common_rsp(),
        any::<u16>(),
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |((list, opcode, return_code), msg, g, job, modified_length)| ResponseRepr {
                list,
                opcode,
                return_code,
                message_id: MessageId::from_masked(msg),
                ri_generation: RiGeneration::from_masked(g),
                job_id: JobId::from_masked(job),
                modified_length,
            },
        )
}

pub(crate) fn arb_response_data() -> impl Strategy<Value = ResponseDataRepr> {
    (
        arb_common_rsp(),
        (any::<u16>(), any::<u32>(), any::<u16>()),
        (arb_len14(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |(
                (list, opcode, return_code),
                (msg, job, rd_msg),
                (payload_length, modified_length, message_offset),
            )| ResponseDataRepr {
                list,
                opcode,
                return_code,
                message_id: MessageId::from_masked(msg),
                job_id: JobId::from_masked(job),
                read_request_message_id: MessageId::from_masked(rd_msg),
                payload_length,
                modified_length,
                message_offset,
            },
        )
}

pub(crate) fn arb_response_data_small() -> impl Strategy<Value = ResponseDataSmallRepr> {
    (arb_common_rsp(), arb_len14(), any::<u32>(), any::<u32>()).prop_map(
        |((list, opcode, return_code), payload_length, job, psn)| ResponseDataSmallRepr {
            list,
            opcode,
            return_code,
            payload_length,
            job_id: JobId::from_masked(job),
            original_request_psn: Psn(psn),
        },
    )
}

pub(crate) fn arb_ses_repr() -> impl Strategy<Value = SesRepr> {
    prop_oneof![
        arb_small().prop_map(SesRepr::Small),
        arb_medium().prop_map(SesRepr::Medium),
        arb_standard_request().prop_map(SesRepr::Standard),
        arb_response().prop_map(SesRepr::Response),
        arb_response_data().prop_map(SesRepr::ResponseData),
        arb_response_data_small().prop_map(SesRepr::ResponseDataSmall),
    ]
}
