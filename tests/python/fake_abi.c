/* A library that claims another C ABI version (KJIT_FAKE_ABI_VERSION, with no kjit_abi_minor: a
 * minor version of 0, as every library before 1.1): the Python package must refuse it by name. */
unsigned kjit_abi_version(void) { return KJIT_FAKE_ABI_VERSION; }
