//! The system's user database: an account's uid, gid, home and shell, read
//! through `nix` (its safe wrappers of `getpw*_r`).

use std::path::PathBuf;

/// A local account: uid, gid, home and login shell.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: PathBuf,
    pub(crate) shell: PathBuf,
}

/// Looks an account up in the system's user database.
pub(crate) fn lookup_account(name: &str) -> Result<Account, String> {
    match nix::unistd::User::from_name(name) {
        Ok(Some(user)) => Ok(account_from(user)),
        Ok(None) => Err(format!("no account `{name}` on this host")),
        Err(e) => Err(format!("cannot look up account `{name}`: {e}")),
    }
}

/// The account this process runs as.
pub(crate) fn current_account() -> Result<Account, String> {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => Ok(account_from(user)),
        Ok(None) => Err(format!("uid {uid} has no account entry")),
        Err(e) => Err(format!("cannot look up uid {uid}: {e}")),
    }
}

/// nix grows its buffer while an entry does not fit (ERANGE), so a passwd
/// entry of any size is read.
fn account_from(user: nix::unistd::User) -> Account {
    let shell = if user.shell.as_os_str().is_empty() {
        PathBuf::from("/bin/sh")
    } else {
        user.shell
    };
    Account {
        name: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home: user.dir,
        shell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_found_by_name_and_uid() {
        let root = lookup_account("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.home.is_absolute());
        let me = current_account().unwrap();
        assert_eq!(lookup_account(&me.name).unwrap().uid, me.uid);
        let err = lookup_account("no-such-account-walissh").unwrap_err();
        assert_eq!(err, "no account `no-such-account-walissh` on this host");
        assert!(lookup_account("bad\0name").is_err());
    }
}
