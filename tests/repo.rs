//! Repository-level tests: the committed goldens, the CLI as a user runs it, the documents that
//! must agree with the code, and the direction of dependencies. One test binary on purpose: each
//! extra binary costs a link on CI's two cores.

mod repo {
    pub mod cli;
    pub mod deps;
    pub mod docs;
    pub mod golden;
    pub mod independent;
    pub mod record;
    pub mod testbed;
}
