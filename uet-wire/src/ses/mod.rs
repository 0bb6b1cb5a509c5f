//! SES headers (`uet-spec-notes.md` §4).
