//! Values: any value as a `serde_json::Value`, skipping one, and type errors naming it.

use serde_json::{Map, Value};

use super::{quoted, JsonError, JsonResult, Parser};

impl Parser<'_> {
    /// The error for a value of the wrong type: consumes a scalar to name it
    /// (`invalid type: string "x", expected u32`), like serde_json.
    #[cold]
    pub fn invalid_type(&mut self, expected: &str) -> Box<JsonError> {
        let found = match self.ws() {
            Some(b'n') => {
                self.pos += 1;
                if let Err(e) = self.ident(b"ull") {
                    return e;
                }
                "null".to_owned()
            }
            Some(b't') => {
                self.pos += 1;
                if let Err(e) = self.ident(b"rue") {
                    return e;
                }
                "boolean `true`".to_owned()
            }
            Some(b'f') => {
                self.pos += 1;
                if let Err(e) = self.ident(b"alse") {
                    return e;
                }
                "boolean `false`".to_owned()
            }
            Some(b'-' | b'0'..=b'9') => {
                let at = self.pos;
                return match self.number_here() {
                    Ok(_) => self.number_error("invalid type", at, expected),
                    Err(e) => e,
                };
            }
            Some(b'"') => {
                self.pos += 1;
                match self.string_body() {
                    Ok(s) => format!("string {}", quoted(&s)),
                    Err(e) => return e,
                }
            }
            Some(b'[') => "sequence".to_owned(),
            Some(b'{') => "map".to_owned(),
            Some(_) => return self.peek_error("expected value"),
            None => return self.peek_error("EOF while parsing a value"),
        };
        self.error(format!("invalid type: {found}, expected {expected}"))
    }

    /// Any value, as a `serde_json::Value` (what `Value`'s `Deserialize` would build: maps
    /// keep first-seen key order and the last value of a repeated key).
    pub fn value(&mut self) -> JsonResult<Value> {
        Ok(match self.ws() {
            Some(b'[') => {
                self.open(b'[', "")?;
                let mut items = Vec::new();
                let mut first = true;
                while self.next_element(first)? {
                    first = false;
                    items.push(self.value()?);
                }
                Value::Array(items)
            }
            Some(b'{') => {
                self.open(b'{', "")?;
                let mut map = Map::new();
                let mut first = true;
                while let Some(k) = self.next_key(first)? {
                    first = false;
                    let v = self.value()?;
                    map.insert(k.into_owned(), v);
                }
                Value::Object(map)
            }
            Some(b'"') => {
                self.pos += 1;
                Value::String(self.string_body()?.into_owned())
            }
            Some(b'-' | b'0'..=b'9') => Value::Number(self.number_here()?.to_number()),
            Some(b'n') => {
                self.pos += 1;
                self.ident(b"ull")?;
                Value::Null
            }
            Some(b't') => {
                self.pos += 1;
                self.ident(b"rue")?;
                Value::Bool(true)
            }
            Some(b'f') => {
                self.pos += 1;
                self.ident(b"alse")?;
                Value::Bool(false)
            }
            Some(_) => return Err(self.peek_error("expected value")),
            None => return Err(self.peek_error("EOF while parsing a value")),
        })
    }

    /// Skip one value checking its syntax only, as serde_json's `IgnoredAny` does: no depth
    /// limit (iterative), `\u` escapes unpaired, numbers of any size.
    pub fn skip(&mut self) -> JsonResult<()> {
        // Open containers, innermost last: b'[' or b'{'.
        let mut stack: Vec<u8> = Vec::new();
        loop {
            // A value.
            match self.ws() {
                Some(b'n') => {
                    self.pos += 1;
                    self.ident(b"ull")?;
                }
                Some(b't') => {
                    self.pos += 1;
                    self.ident(b"rue")?;
                }
                Some(b'f') => {
                    self.pos += 1;
                    self.ident(b"alse")?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.scan_number()?;
                }
                Some(b'"') => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                Some(open @ (b'[' | b'{')) => {
                    self.pos += 1;
                    stack.push(open);
                    // An empty container, or its first element / key.
                    let close = if open == b'[' { b']' } else { b'}' };
                    if self.ws() == Some(close) {
                        self.pos += 1;
                        stack.pop();
                    } else {
                        if open == b'{' {
                            self.skip_key()?;
                        }
                        continue;
                    }
                }
                Some(_) => return Err(self.peek_error("expected value")),
                None => return Err(self.peek_error("EOF while parsing a value")),
            }
            // After a value: close containers or move to the next element.
            loop {
                let Some(&frame) = stack.last() else {
                    return Ok(());
                };
                let (close, what) = if frame == b'[' {
                    (b']', "expected `,` or `]`")
                } else {
                    (b'}', "expected `,` or `}`")
                };
                match self.ws() {
                    Some(b',') => {
                        self.pos += 1;
                        if frame == b'{' {
                            self.skip_key()?;
                        }
                        break;
                    }
                    Some(b) if b == close => {
                        self.pos += 1;
                        stack.pop();
                    }
                    Some(_) => return Err(self.peek_error(what)),
                    None if frame == b'[' => {
                        return Err(self.peek_error("EOF while parsing a list"))
                    }
                    None => return Err(self.peek_error("EOF while parsing an object")),
                }
            }
        }
    }

    fn skip_key(&mut self) -> JsonResult<()> {
        match self.ws() {
            Some(b'"') => self.pos += 1,
            Some(_) => return Err(self.peek_error("key must be a string")),
            None => return Err(self.peek_error("EOF while parsing an object")),
        }
        self.skip_string()?;
        match self.ws() {
            Some(b':') => self.pos += 1,
            Some(_) => return Err(self.peek_error("expected `:`")),
            None => return Err(self.peek_error("EOF while parsing an object")),
        }
        Ok(())
    }

    fn skip_string(&mut self) -> JsonResult<()> {
        loop {
            match self.next_byte()? {
                b'"' => return Ok(()),
                b'\\' => match self.next_byte()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        self.hex4()?;
                    }
                    _ => return Err(self.error("invalid escape")),
                },
                0..=0x1f => {
                    return Err(self
                        .error("control character (\\u0000-\\u001F) found while parsing a string"))
                }
                _ => {}
            }
        }
    }
}
