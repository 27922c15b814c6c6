//! vLLM's KV-cache event model (`vllm/distributed/kv_events.py`).
//!
//! Field names, field order and defaults follow upstream exactly, because the msgpack encoder
//! (`crate::wire`) writes events in declaration order and omits defaulted fields that equal
//! their default (msgspec `omit_defaults`). Fields *without* a default upstream are plain
//! values or `Option`s that are always written (as nil when `None`); fields *with* a default
//! of `None` are `Option`s that are omitted when `None`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::hash::BlockHash;

/// An event's block hashes: one inline (the common offload event stores or removes one block),
/// more on the heap. A slice everywhere it is read (`Deref<Target = [BlockHash]>`).
///
/// Why not a `Vec`: decoding 1M one-block events spent one allocation and 32 heap bytes per
/// event on the hash alone (`docs/performance.md`, "msgpack decode against msgspec").
pub type BlockHashes = SmallVec<[BlockHash; 1]>;

/// A string field of an event (`medium`, `lora_name`, `kv_cache_spec_kind`, `locality`,
/// `ownership`). The few values vLLM publishes (`"GPU"`, `"CPU"`, `"full_attention"`, ...:
/// [`label`]) are shared `'static` strings; any other string is kept, owned and exactly as it
/// came. Reads as a `str` (`Deref`); `Some("GPU".into())` builds one.
///
/// Why not a `String`: two owned strings per event were two allocations and 64 heap bytes of a
/// decoded event (`docs/performance.md`).
pub type Label = Cow<'static, str>;

/// The [`Label`] for `s`: the shared string when `s` is one of vLLM's media or KV cache spec
/// kinds (or a locality), else an owned copy.
pub fn label(s: &str) -> Label {
    match known_label(s.as_bytes()) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(s.to_owned()),
    }
}

/// [`label`] of an owned string (kept as is when it is not a known one).
pub fn label_owned(s: String) -> Label {
    match known_label(s.as_bytes()) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(s),
    }
}

/// The strings [`label`] shares: the media ([`Tier::from_medium`]'s, and `"DISK"`), the
/// `kv_cache_spec_kind` values kvscope's simulator writes (`docs/scenario-format.md`) and the
/// localities (`docs/trace-format.md` §1.2). Any other string is kept as an owned copy, so a
/// value missing here only costs an allocation. By bytes, so that a decoder can skip the UTF-8
/// check of these (ASCII) strings.
pub fn known_label(s: &[u8]) -> Option<&'static str> {
    const KNOWN: [&str; 11] = [
        "GPU",
        "CPU",
        "STORAGE",
        "FS",
        "OBJ",
        "DISK",
        "full_attention",
        "sliding_window",
        "mamba",
        "LOCAL",
        "REMOTE",
    ];
    KNOWN.into_iter().find(|k| k.as_bytes() == s)
}

/// One token id. vLLM token ids are non-negative Python ints; kvscope keeps them as `u32`
/// (decoders report values outside that range as errors rather than truncating them).
pub type TokenId = u32;

/// A value inside `BlockStored.extra_keys` (an arbitrary msgpack value: LoRA names, cache
/// salts, `(mm_hash, offset)` tuples, prompt-embedding digests).
///
/// JSON form: nil → `null`, bool, int, float, str → themselves, arrays → arrays,
/// bytes → `{"bytes": "<lowercase hex>"}`, maps → `{"map": [[k, v], ...]}`.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtraValue {
    /// msgpack nil / Python `None`.
    Nil,
    /// msgpack bool.
    Bool(bool),
    /// A non-negative integer.
    UInt(u64),
    /// A negative integer.
    Int(i64),
    /// A float (msgpack float64 or float32 widened).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes (msgpack bin).
    Bytes(Vec<u8>),
    /// An array / Python tuple or list.
    Array(Vec<ExtraValue>),
    /// A map, in wire order.
    Map(Vec<(ExtraValue, ExtraValue)>),
}

/// vLLM's event fields, written once: `BlockStored` and `BlockRemoved` with each field's wire
/// name (the Rust name is the wire name), its value kind ([`FieldRef`]'s variants, which fix
/// the Rust type and every codec's encoding), whether upstream gives it a default, and whether
/// it existed in the legacy array form. Upstream: `vllm/distributed/kv_events.py`
/// (`docs/trace-format.md` §1.2 lists the fields with the vLLM PRs that added them).
///
/// * `always`: no default upstream, so msgspec writes it even when `None` (as nil / `null`);
///   `omitted`: default `None`, omitted from the map form when `None` (msgspec `omit_defaults`).
/// * `positional`: a field of the legacy array form (vLLM before #42892), in declaration
///   order; `map_only`: added after #42892, so never in an array upstream (kvscope appends the
///   map-only fields positionally only when one is set, so no data is dropped).
/// * Non-`Option` kinds (`Hashes`, `Tokens`, `U32`) are required on read; the others read as
///   `None` when missing.
///
/// Every codec is derived from this list: the struct definitions and [`EventFields`] here,
/// the msgpack map and array encoders and decoders (`wire::msgpack`), the JSON Lines reader
/// and writer (`wire::jsonl`) and the npm package's JS objects (`wasm/src/dto.rs`, through
/// this macro). Adding a vLLM field of an existing kind is one line here plus tests.
/// `BlockRemoved`'s fields must be a subset of `BlockStored`'s (true upstream): decoding
/// collects either event's keys in one [`EventFields`] before the tag is known.
#[macro_export]
#[doc(hidden)]
macro_rules! kv_event_schema {
    ($then:path) => {
        $then! {
            /// `BlockStored`: blocks became resident in some tier (`medium`).
            BlockStored {
                /// One hash per block, prefix order.
                block_hashes: Hashes [always, positional],
                /// Hash of the block preceding `block_hashes[0]`, `None` for a root.
                parent_block_hash: Hash [always, positional],
                /// Concatenated token ids of all blocks.
                token_ids: Tokens [always, positional],
                /// Tokens per block (0 for token-less placeholders).
                block_size: U32 [always, positional],
                /// Deprecated LoRA adapter id.
                lora_id: OptI64 [always, positional],
                /// `"GPU"`, `"CPU"`, `"STORAGE"`, or another producer's string.
                medium: OptStr [always, positional],
                /// LoRA adapter name.
                lora_name: OptStr [always, positional],
                /// Per-block extra hash keys.
                extra_keys: ExtraKeys [omitted, positional],
                /// KV cache group index.
                group_idx: OptU32 [omitted, positional],
                /// `KVCacheSpecKind` string, e.g. `"full_attention"`.
                kv_cache_spec_kind: OptStr [omitted, positional],
                /// Sliding window (tokens) for SWA groups.
                kv_cache_spec_sliding_window: OptU64 [omitted, positional],
                /// `"LOCAL"` / `"REMOTE"` (`None`: unspecified).
                locality: OptStr [omitted, map_only],
                /// Secondary-tier owner id (`None`: primary / framework-owned).
                ownership: OptStr [omitted, map_only],
            }
            /// `BlockRemoved`: blocks left a tier.
            BlockRemoved {
                /// Hashes of the removed blocks.
                block_hashes: Hashes [always, positional],
                /// Tier the blocks left.
                medium: OptStr [always, positional],
                /// KV cache group index.
                group_idx: OptU32 [omitted, positional],
                /// Locality.
                locality: OptStr [omitted, map_only],
                /// Secondary-tier owner id.
                ownership: OptStr [omitted, map_only],
            }
        }
    };
}

/// The Rust type of a field kind.
macro_rules! field_type {
    (Hashes) => { BlockHashes };
    (Hash) => { Option<BlockHash> };
    (Tokens) => { Vec<TokenId> };
    (U32) => { u32 };
    (OptU32) => { Option<u32> };
    (OptU64) => { Option<u64> };
    (OptI64) => { Option<i64> };
    (OptStr) => { Option<Label> };
    (ExtraKeys) => { Option<Vec<Option<ExtraValue>>> };
}

/// The event structs, their field tables and [`EventFields`], from [`kv_event_schema!`].
macro_rules! define_events {
    (
        $(#[$sdoc:meta])* BlockStored {
            $( $(#[$sfdoc:meta])* $sname:ident : $skind:ident [$spres:ident, $sera:ident], )*
        }
        $(#[$rdoc:meta])* BlockRemoved {
            $( $(#[$rfdoc:meta])* $rname:ident : $rkind:ident [$rpres:ident, $rera:ident], )*
        }
    ) => {
        define_events!(@struct $(#[$sdoc])* BlockStored { $( $(#[$sfdoc])* $sname : $skind [$spres, $sera], )* });
        define_events!(@struct $(#[$rdoc])* BlockRemoved { $( $(#[$rfdoc])* $rname : $rkind [$rpres, $rera], )* });

        /// Every event field as decoded so far, before the event's tag is known (a map's keys
        /// come in any order): written into a `BlockStored` (whose fields include
        /// `BlockRemoved`'s), with a mask of the fields read. A decoder writes each value
        /// straight into its place, and the msgpack decoder's `BlockStored` is already the
        /// event's place in its batch, so a decoded event is never moved (every move of a
        /// 272-byte event was a `memcpy`: `docs/performance.md`).
        pub struct EventFields<'a> {
            /// The values read so far (the rest are `BlockStored::default()`'s).
            stored: &'a mut BlockStored,
            /// Bit `i` set: field `i` of `BlockStored::FIELDS` was read.
            read: u32,
        }

        /// `BlockStored`'s fields by position, for a jump table in [`EventFields::slot_at`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum FieldId { $( $sname, )* }

        impl FieldId {
            const ALL: &'static [FieldId] = &[ $( FieldId::$sname, )* ];
        }

        impl<'a> EventFields<'a> {
            /// Fields to be read into `stored`, a `BlockStored::default()`.
            #[inline]
            pub fn new(stored: &'a mut BlockStored) -> Self {
                EventFields { stored, read: 0 }
            }

            /// The slot of the field named `name`, with its `'static` name.
            pub fn slot(&mut self, name: &str) -> Option<(&'static str, FieldSlot<'_>)> {
                let index = BlockStored::FIELDS.iter().position(|f| f.name == name)?;
                self.slot_at(index)
            }

            /// [`Self::slot`] by position in `BlockStored::FIELDS` (`None` past the end).
            #[inline]
            pub fn slot_at(&mut self, index: usize) -> Option<(&'static str, FieldSlot<'_>)> {
                let id = *FieldId::ALL.get(index)?;
                self.read |= 1 << index;
                Some(match id {
                    $( FieldId::$sname => (stringify!($sname), FieldValue::slot(&mut self.stored.$sname)), )*
                })
            }

            /// The first required field of `fields` (a subset of `BlockStored::FIELDS`) that
            /// was not read.
            fn missing(&self, fields: &[FieldSpec]) -> Option<&'static str> {
                fields.iter().find(|f| {
                    f.required
                        && !BlockStored::FIELDS
                            .iter()
                            .position(|s| s.name == f.name)
                            .is_some_and(|i| self.read & (1 << i) != 0)
                }).map(|f| f.name)
            }

            /// Whether the fields read make a `BlockStored` (then it is the `stored` given to
            /// [`Self::new`]); `Err(name)` for a missing required field.
            #[inline]
            pub fn block_stored(&self) -> Result<(), &'static str> {
                // Fast check: every required field read (the usual case).
                if self.read & BlockStored::REQUIRED != BlockStored::REQUIRED {
                    return Err(self.missing(BlockStored::FIELDS).unwrap_or("?"));
                }
                Ok(())
            }

            /// A `BlockRemoved` of the fields read (taken out of `stored`); `Err(name)` for a
            /// missing required field.
            pub fn block_removed(self) -> Result<BlockRemoved, &'static str> {
                if let Some(name) = self.missing(BlockRemoved::FIELDS) {
                    return Err(name);
                }
                let s = self.stored;
                Ok(BlockRemoved { $( $rname: std::mem::take(&mut s.$rname), )* })
            }
        }
    };
    (@struct $(#[$doc:meta])* $ty:ident { $( $(#[$fdoc:meta])* $name:ident : $kind:ident [$pres:ident, $era:ident], )* }) => {
        $(#[$doc])*
        ///
        /// `Default` is an event with no blocks and every optional field `None` (for building
        /// events with `..Default::default()` without naming every field).
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $ty {
            $(
                $(#[$fdoc])*
                #[doc = concat!("\n\nWire: ", stringify!($kind), ", ", stringify!($pres), ", ", stringify!($era), ".")]
                pub $name: field_type!($kind),
            )*
        }

        impl $ty {
            /// The upstream class name, which is also the wire tag.
            pub const TAG: &'static str = stringify!($ty);

            /// The fields, in declaration order.
            pub const FIELDS: &'static [FieldSpec] = &[
                $( FieldSpec {
                    name: stringify!($name),
                    presence: Presence::$pres,
                    era: Era::$era,
                    required: <field_type!($kind) as FieldValue>::REQUIRED,
                }, )*
            ];

            /// Bit `i` set: field `i` of [`Self::FIELDS`] is required on read.
            pub const REQUIRED: u32 = {
                let mut mask = 0;
                let mut i = 0;
                while i < Self::FIELDS.len() {
                    if Self::FIELDS[i].required {
                        mask |= 1 << i;
                    }
                    i += 1;
                }
                mask
            };

            /// The field values, in [`Self::FIELDS`] order.
            pub fn fields(&self) -> [FieldRef<'_>; Self::FIELDS.len()] {
                [ $( FieldValue::as_ref(&self.$name), )* ]
            }
        }
    };
}

kv_event_schema!(define_events);

/// Whether a field is written when `None` (see [`kv_event_schema!`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum Presence {
    /// No default upstream: always written (nil / `null` when `None`).
    always,
    /// Default `None`: omitted from the map form when `None`.
    omitted,
}

/// Which encodings a field exists in (see [`kv_event_schema!`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum Era {
    /// A field of the legacy positional array form.
    positional,
    /// Map form only upstream (added after vLLM #42892).
    map_only,
}

/// One field of an event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpec {
    /// The wire name (map key, JSON key, JS property).
    pub name: &'static str,
    /// Written when `None`, or omitted.
    pub presence: Presence,
    /// In the legacy array form or map-only.
    pub era: Era,
    /// Required on read (the non-`Option` kinds).
    pub required: bool,
}

impl FieldSpec {
    /// Whether the map form (msgpack or JSON) writes this field when its value is `value`.
    pub fn in_map(&self, value: &FieldRef<'_>) -> bool {
        self.presence == Presence::always || !value.is_none()
    }
}

/// A field's value by kind: what every codec matches on (one arm per kind, never per field).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldRef<'a> {
    /// Block hashes (required).
    Hashes(&'a [BlockHash]),
    /// One block hash or `None`.
    Hash(Option<&'a BlockHash>),
    /// Token ids (required).
    Tokens(&'a [TokenId]),
    /// A `u32` (required).
    U32(u32),
    /// A `u32` or `None`.
    OptU32(Option<u32>),
    /// A `u64` or `None`.
    OptU64(Option<u64>),
    /// An `i64` or `None`.
    OptI64(Option<i64>),
    /// A string or `None`.
    OptStr(Option<&'a str>),
    /// `extra_keys`: per-block extra values, or `None`.
    ExtraKeys(Option<&'a [Option<ExtraValue>]>),
}

impl FieldRef<'_> {
    /// Whether the value is `None` (required kinds never are).
    pub fn is_none(&self) -> bool {
        match self {
            FieldRef::Hashes(_) | FieldRef::Tokens(_) | FieldRef::U32(_) => false,
            FieldRef::Hash(v) => v.is_none(),
            FieldRef::OptU32(v) => v.is_none(),
            FieldRef::OptU64(v) => v.is_none(),
            FieldRef::OptI64(v) => v.is_none(),
            FieldRef::OptStr(v) => v.is_none(),
            FieldRef::ExtraKeys(v) => v.is_none(),
        }
    }
}

/// Where a decoder puts a field's value, by kind.
#[derive(Debug)]
pub enum FieldSlot<'a> {
    /// See [`FieldRef::Hashes`].
    Hashes(&'a mut BlockHashes),
    /// See [`FieldRef::Hash`].
    Hash(&'a mut Option<BlockHash>),
    /// See [`FieldRef::Tokens`].
    Tokens(&'a mut Vec<TokenId>),
    /// See [`FieldRef::U32`].
    U32(&'a mut u32),
    /// See [`FieldRef::OptU32`].
    OptU32(&'a mut Option<u32>),
    /// See [`FieldRef::OptU64`].
    OptU64(&'a mut Option<u64>),
    /// See [`FieldRef::OptI64`].
    OptI64(&'a mut Option<i64>),
    /// See [`FieldRef::OptStr`].
    OptStr(&'a mut Option<Label>),
    /// See [`FieldRef::ExtraKeys`].
    ExtraKeys(&'a mut Option<Vec<Option<ExtraValue>>>),
}

/// The Rust type of a field kind (each kind has its own type).
pub trait FieldValue: Sized {
    /// Whether a decoder must find the field (the non-`Option` kinds).
    const REQUIRED: bool;
    /// The value as a [`FieldRef`].
    fn as_ref(&self) -> FieldRef<'_>;
    /// A decoder's slot for the value.
    fn slot(slot: &mut Self) -> FieldSlot<'_>;
}

macro_rules! field_value {
    ($kind:ident, $ty:ty, $required:tt, |$v:ident| $as_ref:expr) => {
        impl FieldValue for $ty {
            const REQUIRED: bool = $required;
            fn as_ref(&self) -> FieldRef<'_> {
                let $v = self;
                FieldRef::$kind($as_ref)
            }
            fn slot(slot: &mut Self) -> FieldSlot<'_> {
                FieldSlot::$kind(slot)
            }
        }
    };
}

field_value!(Hashes, BlockHashes, true, |v| v);
field_value!(Hash, Option<BlockHash>, false, |v| v.as_ref());
field_value!(Tokens, Vec<TokenId>, true, |v| v);
field_value!(U32, u32, true, |v| *v);
field_value!(OptU32, Option<u32>, false, |v| *v);
field_value!(OptU64, Option<u64>, false, |v| *v);
field_value!(OptI64, Option<i64>, false, |v| *v);
field_value!(OptStr, Option<Label>, false, |v| v.as_deref());
field_value!(ExtraKeys, Option<Vec<Option<ExtraValue>>>, false, |v| v
    .as_deref());

/// One KV-cache event (`KVCacheEvent` tagged union; the msgpack tag key is `"type"`).
#[derive(Clone, Debug, PartialEq)]
pub enum KvEvent {
    /// `BlockStored`.
    BlockStored(BlockStored),
    /// `BlockRemoved`.
    BlockRemoved(BlockRemoved),
    /// `AllBlocksCleared` (no fields).
    AllBlocksCleared,
}

impl KvEvent {
    /// The upstream class name, which is also the wire tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            KvEvent::BlockStored(_) => "BlockStored",
            KvEvent::BlockRemoved(_) => "BlockRemoved",
            KvEvent::AllBlocksCleared => "AllBlocksCleared",
        }
    }

    /// The event's medium string, if it has one.
    pub fn medium(&self) -> Option<&str> {
        match self {
            KvEvent::BlockStored(e) => e.medium.as_deref(),
            KvEvent::BlockRemoved(e) => e.medium.as_deref(),
            KvEvent::AllBlocksCleared => None,
        }
    }

    /// Block hashes named by the event (empty for `AllBlocksCleared`).
    pub fn block_hashes(&self) -> &[BlockHash] {
        match self {
            KvEvent::BlockStored(e) => &e.block_hashes,
            KvEvent::BlockRemoved(e) => &e.block_hashes,
            KvEvent::AllBlocksCleared => &[],
        }
    }
}

/// `KVEventBatch`: one engine step's events, `[ts, events, data_parallel_rank]` on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct KvEventBatch {
    /// Publish time, seconds since the epoch (`time.time()`), always a float64 on the wire.
    pub ts: f64,
    /// Events in publish order: GPU block-pool events first, then connector events.
    pub events: Vec<KvEvent>,
    /// Data-parallel rank of the publisher (nil only for batches never published).
    pub data_parallel_rank: Option<u32>,
}

/// The tier an event belongs to, derived from `medium` (and `ownership` for secondary tiers).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// `medium` `"GPU"` or nil (nil means GPU for vLLM's block pool).
    Gpu,
    /// `"CPU"` (the offloading connector's primary tier).
    Cpu,
    /// `"STORAGE"` (or the older `"FS"` / `"OBJ"`), keyed by ownership or provenance tier name.
    Storage(Option<String>),
    /// Any other producer's medium string (`"DISK"`, `"CPU_PINNED"`, ...).
    Other(String),
}

impl Tier {
    /// Classify a `(medium, ownership)` pair.
    pub fn from_medium(medium: Option<&str>, ownership: Option<&str>) -> Tier {
        match medium {
            None | Some("GPU") => Tier::Gpu,
            Some("CPU") => Tier::Cpu,
            Some("STORAGE") | Some("FS") | Some("OBJ") => {
                Tier::Storage(ownership.map(str::to_owned))
            }
            Some(other) => Tier::Other(other.to_owned()),
        }
    }

    /// A short label for lanes and reports (`GPU`, `CPU`, `STORAGE`, `STORAGE:fs0`, ...).
    pub fn label(&self) -> String {
        match self {
            Tier::Gpu => "GPU".into(),
            Tier::Cpu => "CPU".into(),
            Tier::Storage(None) => "STORAGE".into(),
            Tier::Storage(Some(o)) => format!("STORAGE:{o}"),
            Tier::Other(m) => m.clone(),
        }
    }
}

impl KvEvent {
    /// The tier this event belongs to (`AllBlocksCleared` has none).
    pub fn tier(&self) -> Option<Tier> {
        match self {
            KvEvent::BlockStored(e) => Some(Tier::from_medium(
                e.medium.as_deref(),
                e.ownership.as_deref(),
            )),
            KvEvent::BlockRemoved(e) => Some(Tier::from_medium(
                e.medium.as_deref(),
                e.ownership.as_deref(),
            )),
            KvEvent::AllBlocksCleared => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded trace holds one `KvEvent` per event, so its size is memory (and fresh-page
    /// faults) for every large trace (`docs/performance.md`, "The event representation"). A
    /// regression guard on 64-bit targets, not a goal.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_event_is_at_most_272_bytes() {
        let size = std::mem::size_of::<KvEvent>();
        assert!(size <= 272, "KvEvent is {size} bytes");
        // A known label costs no allocation; any other string is kept exactly.
        assert!(matches!(label("GPU"), Label::Borrowed("GPU")));
        assert!(matches!(label("gpu"), Label::Owned(ref s) if s == "gpu"));
    }
}
