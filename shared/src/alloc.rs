//! The allocator every function runs on: mimalloc instead of glibc's malloc.
//!
//! An AWS SDK request allocates and frees a few hundred small blocks (its config bag, header
//! maps, interceptor lists, the body); under glibc those calls were about 111,000 of a request's
//! 486,000 instructions (`docs/history.md`, "The allocator and the legacy HTTP client"). Each function's `main.rs` installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: shared::alloc::Allocator = shared::alloc::Allocator;
//! ```
//!
//! The bench's counting allocator (`local::peak_alloc`) forwards to the same one, so what the
//! bench measures is what the functions run.

pub use mimalloc::MiMalloc as Allocator;
