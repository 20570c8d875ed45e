//! `init` and the C boundary's errors, in a process of their own: the event list is global,
//! and a region begun by another test first would change which error a second init gets.

use counterpoint_selfmon::ffi::{cp_init, cp_last_error, cp_region_begin, cp_region_end};
use counterpoint_selfmon::{init, parse_events, SelfmonError};
use std::ffi::CStr;

fn last_error() -> String {
    // SAFETY: the library returns a NUL-terminated string valid until the next call.
    unsafe { CStr::from_ptr(cp_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn init_errors_say_what_came_first_and_success_clears_them() {
    // A list naming an event twice is refused for what it is.
    match parse_events("task-clock,task-clock") {
        Err(e @ SelfmonError::Repeated { .. }) => {
            assert!(
                e.to_string().contains("'task-clock' is listed twice"),
                "{e}"
            )
        }
        other => panic!("{:?}", other.map(|v| v.len())),
    }
    // SAFETY: NULL is "task-clock"; the strings are NUL-terminated literals.
    unsafe {
        assert_eq!(cp_init(std::ptr::null()), 0);
        assert_eq!(last_error(), "");
        // A second init with another list: the earlier init is named, not a region.
        assert_eq!(cp_init(c"page-faults".as_ptr()), -1);
        let e = last_error();
        assert!(
            e.contains("already initialised with events 'task-clock'"),
            "{e}"
        );
        // The next call that succeeds clears the error, as the header says.
        let h = cp_region_begin(c"init-test".as_ptr());
        assert!(h >= 0);
        assert_eq!(last_error(), "");
        assert_eq!(cp_region_end(h), 0);
        // The same list again is harmless.
        assert_eq!(cp_init(c"task-clock".as_ptr()), 0);
    }
    assert!(init("task-clock").is_ok());
}
