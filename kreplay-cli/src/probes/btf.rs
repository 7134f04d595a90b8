//! Byte offsets of kernel struct members, read from the kernel's BTF (`/sys/kernel/btf/vmlinux`),
//! for BPF programs that read kernel memory without CO-RE relocations.
//!
//! The format (the kernel's `Documentation/bpf/btf.rst`): a header `{ magic u16 = 0xeB9F,
//! version u8, flags u8, hdr_len u32, type_off u32, type_len u32, str_off u32, str_len u32 }`,
//! then the type section at `hdr_len + type_off` and the string section at `hdr_len + str_off`.
//! Each type is `{ name_off u32, info u32, size_or_type u32 }` (kind in bits 24–28 of `info`,
//! member count in bits 0–15, `kind_flag` in bit 31) followed by data whose length depends on
//! the kind; type ids count from 1. A struct's or union's members are `{ name_off, type,
//! offset }`, the offset in bits (the low 24 bits when `kind_flag` is set).
use std::path::Path;

use kreplay_common::probe::discovery::FileOffsets;

/// The kernel's BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Errors finding a member.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    /// The file could not be read.
    #[error("reading {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The system's message.
        message: String,
    },
    /// The data is not BTF or is cut short.
    #[error("malformed BTF: {0}")]
    Malformed(&'static str),
    /// A kind this reader does not know (a newer kernel's): its length is unknown.
    #[error("BTF type kind {0} is not known to this kreplay")]
    UnknownKind(u32),
    /// No struct of that name, or no member of that name in it.
    #[error("no member {member} in struct {strukt}")]
    NotFound {
        /// The struct.
        strukt: String,
        /// The member.
        member: String,
    },
}

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

/// One type: kind, name offset, `kind_flag`, and where its members start (structs, unions).
struct Type {
    kind: u32,
    name_off: u32,
    kind_flag: bool,
    vlen: usize,
    data: usize,
}

/// A parsed BTF blob.
pub struct Btf<'a> {
    types: Vec<Type>,
    type_data: &'a [u8],
    strings: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, BtfError> {
    b.get(at..at + 4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("four bytes")))
        .ok_or(BtfError::Malformed("cut short"))
}

/// The bytes of data that follow a type of `kind` with `vlen` items.
fn data_len(kind: u32, vlen: usize) -> Result<usize, BtfError> {
    Ok(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
        // INT, VAR, DECL_TAG.
        1 | 14 | 17 => 4,
        // ARRAY.
        3 => 12,
        // STRUCT, UNION, DATASEC, ENUM64: 12 bytes per item.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM, FUNC_PROTO: 8 bytes per item.
        6 | 13 => 8 * vlen,
        k => return Err(BtfError::UnknownKind(k)),
    })
}

impl<'a> Btf<'a> {
    /// Parses `data` (little-endian BTF, as on x86_64).
    pub fn parse(data: &'a [u8]) -> Result<Btf<'a>, BtfError> {
        if data.get(..2) != Some(&[0x9f, 0xeb]) {
            return Err(BtfError::Malformed("bad magic"));
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let (type_off, type_len) = (u32_at(data, 8)? as usize, u32_at(data, 12)? as usize);
        let (str_off, str_len) = (u32_at(data, 16)? as usize, u32_at(data, 20)? as usize);
        let section = |off: usize, len: usize| {
            data.get(hdr_len + off..hdr_len + off + len)
                .ok_or(BtfError::Malformed("section out of bounds"))
        };
        let type_data = section(type_off, type_len)?;
        let strings = section(str_off, str_len)?;
        let mut types = Vec::new();
        let mut at = 0;
        while at < type_data.len() {
            let name_off = u32_at(type_data, at)?;
            let info = u32_at(type_data, at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            types.push(Type {
                kind,
                name_off,
                kind_flag: info >> 31 == 1,
                vlen,
                data: at + 12,
            });
            at += 12 + data_len(kind, vlen)?;
        }
        Ok(Btf {
            types,
            type_data,
            strings,
        })
    }

    fn name(&self, off: u32) -> &[u8] {
        let rest = self.strings.get(off as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    /// The type of id `id` (ids count from 1; 0 is void).
    fn ty(&self, id: u32) -> Option<&Type> {
        self.types.get((id as usize).checked_sub(1)?)
    }

    /// The byte offset of `member` in struct `strukt`, looking inside anonymous struct and
    /// union members (a kernel built with struct randomization wraps fields in one).
    pub fn member_offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let not_found = || BtfError::NotFound {
            strukt: strukt.to_string(),
            member: member.to_string(),
        };
        self.types
            .iter()
            .filter(|t| t.kind == KIND_STRUCT && self.name(t.name_off) == strukt.as_bytes())
            .find_map(|t| self.find_in(t, member.as_bytes(), 0, 4))
            .map(|bits| bits / 8)
            .ok_or_else(not_found)
    }

    /// The bit offset of `member` in `t` (at `base` bits), searching anonymous members up to
    /// `depth` levels down.
    fn find_in(&self, t: &Type, member: &[u8], base: u32, depth: u32) -> Option<u32> {
        for i in 0..t.vlen {
            let at = t.data + 12 * i;
            let name_off = u32_at(self.type_data, at).ok()?;
            let type_id = u32_at(self.type_data, at + 4).ok()?;
            let raw = u32_at(self.type_data, at + 8).ok()?;
            let bits = base + if t.kind_flag { raw & 0xff_ffff } else { raw };
            if name_off == 0 {
                if depth > 0
                    && let Some(inner) = self.ty(type_id)
                    && matches!(inner.kind, KIND_STRUCT | KIND_UNION)
                    && let Some(found) = self.find_in(inner, member, bits, depth - 1)
                {
                    return Some(found);
                }
            } else if self.name(name_off) == member {
                return Some(bits);
            }
        }
        None
    }
}

/// The byte offsets of `pid` and `tgid` in the running kernel's `struct task_struct`.
pub fn task_pid_tgid_offsets(path: &Path) -> Result<(u32, u32), BtfError> {
    let data = std::fs::read(path).map_err(|e| BtfError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let btf = Btf::parse(&data)?;
    Ok((
        btf.member_offset("task_struct", "pid")?,
        btf.member_offset("task_struct", "tgid")?,
    ))
}

/// Where the running kernel keeps what the mapping check reads: the task's descriptor table
/// (`task_struct->files`, `files_struct->fdt`, `fdtable->max_fds` and `->fd`), `file->f_inode`,
/// `file->f_path.dentry`, `dentry->d_name.name`, `inode->i_ino`, `inode->i_sb` and
/// `super_block->s_dev`.
pub fn file_offsets(path: &Path) -> Result<FileOffsets, BtfError> {
    let data = std::fs::read(path).map_err(|e| BtfError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let btf = Btf::parse(&data)?;
    Ok(FileOffsets {
        task_files: btf.member_offset("task_struct", "files")?,
        files_fdt: btf.member_offset("files_struct", "fdt")?,
        fdt_max_fds: btf.member_offset("fdtable", "max_fds")?,
        fdt_fd: btf.member_offset("fdtable", "fd")?,
        file_inode: btf.member_offset("file", "f_inode")?,
        file_dentry: btf.member_offset("file", "f_path")? + btf.member_offset("path", "dentry")?,
        dentry_name: btf.member_offset("dentry", "d_name")? + btf.member_offset("qstr", "name")?,
        inode_ino: btf.member_offset("inode", "i_ino")?,
        inode_sb: btf.member_offset("inode", "i_sb")?,
        sb_dev: btf.member_offset("super_block", "s_dev")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob: types as (name_off, info, size_or_type, data words), then strings.
    fn blob(types: &[(u32, u32, u32, Vec<u32>)], strings: &[u8]) -> Vec<u8> {
        let mut ty = Vec::new();
        for (name, info, size, data) in types {
            for w in [*name, *info, *size].iter().chain(data) {
                ty.extend_from_slice(&w.to_le_bytes());
            }
        }
        let mut out = vec![0x9f, 0xeb, 1, 0];
        for w in [
            24u32,
            0,
            ty.len() as u32,
            ty.len() as u32,
            strings.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&ty);
        out.extend_from_slice(strings);
        out
    }

    #[test]
    fn finds_direct_and_anonymous_members_and_says_what_is_missing() {
        // Strings: 1 "int", 5 "task", 10 "pid", 14 "tgid", 19 "other".
        let strings = b"\0int\0task\0pid\0tgid\0other\0";
        let st = |vlen: u32, flag: bool| (KIND_STRUCT << 24) | vlen | ((flag as u32) << 31);
        let types = vec![
            // 1: int (4 bytes, 32 bits).
            (1, 1 << 24, 4, vec![32]),
            // 2: anonymous struct { int pid @ 64 bits; int tgid @ 96 }, bitfield-style offsets.
            (0, st(2, true), 16, vec![10, 1, 64, 14, 1, (5 << 24) | 96]),
            // 3: struct other { int tgid @ 0 } — a decoy of the same member name.
            (19, st(1, false), 4, vec![14, 1, 0]),
            // 4: struct task { an anonymous member of type 2 at 128 bits }.
            (5, st(1, false), 32, vec![0, 2, 128]),
        ];
        let data = blob(&types, strings);
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.member_offset("task", "pid"), Ok((128 + 64) / 8));
        assert_eq!(btf.member_offset("task", "tgid"), Ok((128 + 96) / 8));
        assert_eq!(btf.member_offset("other", "tgid"), Ok(0));
        assert_eq!(
            btf.member_offset("task", "comm"),
            Err(BtfError::NotFound {
                strukt: "task".into(),
                member: "comm".into()
            })
        );
        assert_eq!(
            Btf::parse(&data[..30]).err(),
            Some(BtfError::Malformed("section out of bounds"))
        );
        assert_eq!(
            Btf::parse(b"\0\0\0\0").err(),
            Some(BtfError::Malformed("bad magic"))
        );
    }

    #[test]
    fn the_running_kernels_task_struct_has_tgid_right_after_pid() {
        let path = Path::new(VMLINUX_BTF);
        if !path.exists() {
            eprintln!("skipped: no {VMLINUX_BTF} on this kernel");
            return;
        }
        let (pid, tgid) = task_pid_tgid_offsets(path).unwrap();
        // `pid_t pid; pid_t tgid;` are declared together in include/linux/sched.h, deep in
        // the struct.
        assert_eq!(tgid, pid + 4);
        assert!(pid > 1000, "{pid}");
    }

    #[test]
    fn the_running_kernels_file_members_are_found() {
        let path = Path::new(VMLINUX_BTF);
        if !path.exists() {
            eprintln!("skipped: no {VMLINUX_BTF} on this kernel");
            return;
        }
        let o = file_offsets(path).unwrap();
        // `struct path { struct vfsmount *mnt; struct dentry *dentry; }` and `struct qstr`'s
        // 8-byte hash_len before its name pointer fix two of them relative to their container.
        let data = std::fs::read(path).unwrap();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(
            o.file_dentry,
            btf.member_offset("file", "f_path").unwrap() + 8
        );
        assert_eq!(
            o.dentry_name,
            btf.member_offset("dentry", "d_name").unwrap() + 8
        );
        assert!(o.file_inode > 0 && o.inode_sb > 0 && o.inode_ino > 0 && o.sb_dev > 0);
        // `struct fdtable { unsigned int max_fds; struct file **fd; ... }`.
        assert_eq!((o.fdt_max_fds, o.fdt_fd), (0, 8));
        assert!(o.task_files > 1000, "{}", o.task_files);
    }
}
