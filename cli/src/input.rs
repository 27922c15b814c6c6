//! Reading a command's input file. A file that is missing or unreadable is bad input (exit 2),
//! exactly like a file that does not parse: the one rule for every command
//! (`docs/cli.md`, exit codes).

use std::io::Read as _;
use std::path::Path;

use crate::exit::BadInput;

/// Read `path` whole (`-` = stdin); any failure is [`BadInput`] naming the path.
pub fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| BadInput(format!("cannot read stdin: {e}")))?;
        return Ok(buf);
    }
    std::fs::read(path).map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())).into())
}
