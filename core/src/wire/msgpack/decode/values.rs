//! The values vLLM's schema leaves open: the items of `extra_keys` (any msgpack value kvscope
//! keeps as an [`ExtraValue`]) and the values of fields kvscope does not know, which it skips.
//! Both are bounded by `MAX_DEPTH`, so a deeply nested input is a located error, not a stack
//! overflow.

use super::*;

impl<'a> Reader<'a> {
    pub(super) fn extra_value(&mut self, depth: usize) -> Res<ExtraValue> {
        let (m, at) = self.marker()?;
        if let Some(i) = self.int_body(m)? {
            return Ok(match i {
                Int::U(v) => ExtraValue::UInt(v),
                Int::N(v) => ExtraValue::Int(v),
            });
        }
        Ok(match m {
            Marker::Null => ExtraValue::Nil,
            Marker::True => ExtraValue::Bool(true),
            Marker::False => ExtraValue::Bool(false),
            Marker::F64 => ExtraValue::Float(finite(f64::from_bits(self.be(8, "float64")?), at)?),
            Marker::F32 => ExtraValue::Float(finite(
                f64::from(f32::from_bits(self.be(4, "float32")? as u32)),
                at,
            )?),
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                ExtraValue::Str(self.str_body(len, at)?.to_owned())
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                ExtraValue::Bytes(self.take(len, "bin")?.to_vec())
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                let mut v = Vec::with_capacity(n.min(self.remaining()));
                for _ in 0..n {
                    v.push(self.extra_value(depth + 1)?);
                }
                ExtraValue::Array(v)
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                let mut v = Vec::with_capacity(n.min(self.remaining() / 2));
                for _ in 0..n {
                    let k = self.extra_value(depth + 1)?;
                    let val = self.extra_value(depth + 1)?;
                    v.push((k, val));
                }
                ExtraValue::Map(v)
            }
            _ => return Err(err(at, format!("unsupported msgpack {}", kind_name(m)))),
        })
    }

    pub(super) fn extra_keys(&mut self) -> Res<Vec<Option<ExtraValue>>> {
        let (n, _) = self.array_len("array or nil")?;
        let mut v = Vec::with_capacity(n.min(self.remaining()));
        for i in 0..n {
            let item = if self.is_nil() {
                None
            } else {
                Some(
                    self.extra_value(1)
                        .map_err(|e| ctx(e, format_args!("item {i}")))?,
                )
            };
            v.push(item);
        }
        Ok(v)
    }

    /// Skip one value of any type.
    pub(super) fn skip(&mut self, depth: usize) -> Res<()> {
        let (m, at) = self.marker()?;
        if self.int_body(m)?.is_some() {
            return Ok(());
        }
        match m {
            Marker::Null | Marker::True | Marker::False => Ok(()),
            Marker::F32 => self.take(4, "float32").map(drop),
            Marker::F64 => self.take(8, "float64").map(drop),
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                self.take(len, kind_name(m)).map(drop)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                for _ in 0..n {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Marker::FixExt1 => self.take(2, "ext").map(drop),
            Marker::FixExt2 => self.take(3, "ext").map(drop),
            Marker::FixExt4 => self.take(5, "ext").map(drop),
            Marker::FixExt8 => self.take(9, "ext").map(drop),
            Marker::FixExt16 => self.take(17, "ext").map(drop),
            Marker::Ext8 | Marker::Ext16 | Marker::Ext32 => {
                let w = match m {
                    Marker::Ext8 => 1,
                    Marker::Ext16 => 2,
                    _ => 4,
                };
                let len = self.be(w, "ext length")? as usize;
                self.take(len.saturating_add(1), "ext").map(drop)
            }
            _ => Err(Self::type_err(at, "a msgpack value", m)),
        }
    }
}
