/* api_list.h - every HSA entry point the sim implements, as X-macros.
 *
 * CF(ret, name, (params), (args))  core table entry returning a value
 * CV(name, (params), (args))       core table entry returning void
 * AF(ret, name, (params), (args))  AMD extension table entry
 * AX(ret, name, (params), (args))  AMD extension table entry that is NOT exported
 * The implementation of `name` is `sim_name`; exports.c turns each into an exported function
 * dispatching through the (tool-modifiable) table and into the table's default entry.
 */
#define SIG_T hsa_signal_t
#define SV_T hsa_signal_value_t
#define QC_T const hsa_queue_t*
#define SIG_FAMILY_V(op)                                                 \
  CV(hsa_signal_##op##_relaxed, (SIG_T s, SV_T v), (s, v))               \
  CV(hsa_signal_##op##_scacquire, (SIG_T s, SV_T v), (s, v))             \
  CV(hsa_signal_##op##_screlease, (SIG_T s, SV_T v), (s, v))             \
  CV(hsa_signal_##op##_scacq_screl, (SIG_T s, SV_T v), (s, v))
#define SIG_FAMILY_R(op)                                                 \
  CF(SV_T, hsa_signal_##op##_relaxed, (SIG_T s, SV_T v), (s, v))         \
  CF(SV_T, hsa_signal_##op##_scacquire, (SIG_T s, SV_T v), (s, v))       \
  CF(SV_T, hsa_signal_##op##_screlease, (SIG_T s, SV_T v), (s, v))       \
  CF(SV_T, hsa_signal_##op##_scacq_screl, (SIG_T s, SV_T v), (s, v))
#define SIG_FAMILY_CAS                                                                  \
  CF(SV_T, hsa_signal_cas_relaxed, (SIG_T s, SV_T e, SV_T v), (s, e, v))                \
  CF(SV_T, hsa_signal_cas_scacquire, (SIG_T s, SV_T e, SV_T v), (s, e, v))              \
  CF(SV_T, hsa_signal_cas_screlease, (SIG_T s, SV_T e, SV_T v), (s, e, v))              \
  CF(SV_T, hsa_signal_cas_scacq_screl, (SIG_T s, SV_T e, SV_T v), (s, e, v))

#define KRSIM_API_LIST                                                                         \
  CF(hsa_status_t, hsa_init, (void), ())                                                       \
  CF(hsa_status_t, hsa_shut_down, (void), ())                                                  \
  CF(hsa_status_t, hsa_system_get_info, (hsa_system_info_t a, void* v), (a, v))                \
  CF(hsa_status_t, hsa_system_extension_supported,                                             \
     (uint16_t e, uint16_t mj, uint16_t mn, bool* r), (e, mj, mn, r))                          \
  CF(hsa_status_t, hsa_system_get_extension_table, (uint16_t e, uint16_t mj, uint16_t mn,     \
     void* t), (e, mj, mn, t))                                                                 \
  CF(hsa_status_t, hsa_system_major_extension_supported,                                       \
     (uint16_t e, uint16_t mj, uint16_t* mn, bool* r), (e, mj, mn, r))                         \
  CF(hsa_status_t, hsa_system_get_major_extension_table,                                       \
     (uint16_t e, uint16_t mj, size_t len, void* t), (e, mj, len, t))                          \
  CF(hsa_status_t, hsa_agent_extension_supported,                                              \
     (uint16_t e, hsa_agent_t a, uint16_t mj, uint16_t mn, bool* r), (e, a, mj, mn, r))        \
  CF(hsa_status_t, hsa_agent_major_extension_supported,                                        \
     (uint16_t e, hsa_agent_t a, uint16_t mj, uint16_t* mn, bool* r), (e, a, mj, mn, r))       \
  CF(hsa_status_t, hsa_status_string, (hsa_status_t s, const char** str), (s, str))           \
  CF(hsa_status_t, hsa_iterate_agents, (hsa_status_t (*cb)(hsa_agent_t, void*), void* d),     \
     (cb, d))                                                                                  \
  CF(hsa_status_t, hsa_agent_get_info, (hsa_agent_t a, hsa_agent_info_t at, void* v),         \
     (a, at, v))                                                                               \
  CF(hsa_status_t, hsa_agent_iterate_regions, (hsa_agent_t a,                                  \
     hsa_status_t (*cb)(hsa_region_t, void*), void* d), (a, cb, d))                            \
  CF(hsa_status_t, hsa_region_get_info, (hsa_region_t r, hsa_region_info_t at, void* v),      \
     (r, at, v))                                                                               \
  CF(hsa_status_t, hsa_memory_register, (void* p, size_t n), (p, n))                           \
  CF(hsa_status_t, hsa_memory_deregister, (void* p, size_t n), (p, n))                         \
  CF(hsa_status_t, hsa_memory_allocate, (hsa_region_t r, size_t n, void** p), (r, n, p))      \
  CF(hsa_status_t, hsa_memory_free, (void* p), (p))                                            \
  CF(hsa_status_t, hsa_memory_copy, (void* d, const void* s, size_t n), (d, s, n))            \
  CF(hsa_status_t, hsa_memory_assign_agent, (void* p, hsa_agent_t a,                           \
     hsa_access_permission_t ac), (p, a, ac))                                                  \
  CF(hsa_status_t, hsa_queue_create, (hsa_agent_t a, uint32_t n, hsa_queue_type32_t t,         \
     void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* d, uint32_t ps, uint32_t gs,         \
     hsa_queue_t** q), (a, n, t, cb, d, ps, gs, q))                                            \
  CF(hsa_status_t, hsa_queue_destroy, (hsa_queue_t* q), (q))                                   \
  CF(hsa_status_t, hsa_queue_inactivate, (hsa_queue_t* q), (q))                                \
  CF(uint64_t, hsa_queue_load_read_index_scacquire, (QC_T q), (q))                             \
  CF(uint64_t, hsa_queue_load_read_index_relaxed, (QC_T q), (q))                               \
  CF(uint64_t, hsa_queue_load_write_index_scacquire, (QC_T q), (q))                            \
  CF(uint64_t, hsa_queue_load_write_index_relaxed, (QC_T q), (q))                              \
  CV(hsa_queue_store_write_index_relaxed, (QC_T q, uint64_t v), (q, v))                        \
  CV(hsa_queue_store_write_index_screlease, (QC_T q, uint64_t v), (q, v))                      \
  CF(uint64_t, hsa_queue_cas_write_index_scacq_screl, (QC_T q, uint64_t e, uint64_t v),       \
     (q, e, v))                                                                                \
  CF(uint64_t, hsa_queue_cas_write_index_scacquire, (QC_T q, uint64_t e, uint64_t v),         \
     (q, e, v))                                                                                \
  CF(uint64_t, hsa_queue_cas_write_index_relaxed, (QC_T q, uint64_t e, uint64_t v), (q, e, v))\
  CF(uint64_t, hsa_queue_cas_write_index_screlease, (QC_T q, uint64_t e, uint64_t v),         \
     (q, e, v))                                                                                \
  CF(uint64_t, hsa_queue_add_write_index_scacq_screl, (QC_T q, uint64_t v), (q, v))            \
  CF(uint64_t, hsa_queue_add_write_index_scacquire, (QC_T q, uint64_t v), (q, v))              \
  CF(uint64_t, hsa_queue_add_write_index_relaxed, (QC_T q, uint64_t v), (q, v))                \
  CF(uint64_t, hsa_queue_add_write_index_screlease, (QC_T q, uint64_t v), (q, v))              \
  CV(hsa_queue_store_read_index_relaxed, (QC_T q, uint64_t v), (q, v))                         \
  CV(hsa_queue_store_read_index_screlease, (QC_T q, uint64_t v), (q, v))                       \
  CF(hsa_status_t, hsa_signal_create, (SV_T v, uint32_t n, const hsa_agent_t* c,               \
     hsa_signal_t* s), (v, n, c, s))                                                           \
  CF(hsa_status_t, hsa_signal_destroy, (SIG_T s), (s))                                         \
  CF(SV_T, hsa_signal_load_relaxed, (SIG_T s), (s))                                            \
  CF(SV_T, hsa_signal_load_scacquire, (SIG_T s), (s))                                          \
  CV(hsa_signal_store_relaxed, (SIG_T s, SV_T v), (s, v))                                      \
  CV(hsa_signal_store_screlease, (SIG_T s, SV_T v), (s, v))                                    \
  CV(hsa_signal_silent_store_relaxed, (SIG_T s, SV_T v), (s, v))                               \
  CV(hsa_signal_silent_store_screlease, (SIG_T s, SV_T v), (s, v))                             \
  CF(SV_T, hsa_signal_wait_relaxed, (SIG_T s, hsa_signal_condition_t c, SV_T v, uint64_t t,    \
     hsa_wait_state_t w), (s, c, v, t, w))                                                     \
  CF(SV_T, hsa_signal_wait_scacquire, (SIG_T s, hsa_signal_condition_t c, SV_T v, uint64_t t,  \
     hsa_wait_state_t w), (s, c, v, t, w))                                                     \
  SIG_FAMILY_V(and) SIG_FAMILY_V(or) SIG_FAMILY_V(xor) SIG_FAMILY_V(add)                       \
  SIG_FAMILY_V(subtract) SIG_FAMILY_R(exchange) SIG_FAMILY_CAS                                 \
  CF(hsa_status_t, hsa_code_object_reader_create_from_memory, (const void* co, size_t n,       \
     hsa_code_object_reader_t* r), (co, n, r))                                                 \
  CF(hsa_status_t, hsa_code_object_reader_destroy, (hsa_code_object_reader_t r), (r))          \
  CF(hsa_status_t, hsa_executable_create_alt, (hsa_profile_t p,                                \
     hsa_default_float_rounding_mode_t m, const char* o, hsa_executable_t* e), (p, m, o, e))   \
  CF(hsa_status_t, hsa_executable_create, (hsa_profile_t p, hsa_executable_state_t st,         \
     const char* o, hsa_executable_t* e), (p, st, o, e))                                       \
  CF(hsa_status_t, hsa_executable_destroy, (hsa_executable_t e), (e))                          \
  CF(hsa_status_t, hsa_executable_load_agent_code_object, (hsa_executable_t e, hsa_agent_t a,  \
     hsa_code_object_reader_t r, const char* o, hsa_loaded_code_object_t* l), (e, a, r, o, l)) \
  CF(hsa_status_t, hsa_executable_freeze, (hsa_executable_t e, const char* o), (e, o))         \
  CF(hsa_status_t, hsa_executable_get_info, (hsa_executable_t e, hsa_executable_info_t a,      \
     void* v), (e, a, v))                                                                      \
  CF(hsa_status_t, hsa_executable_validate_alt, (hsa_executable_t e, const char* o,            \
     uint32_t* r), (e, o, r))                                                                  \
  CF(hsa_status_t, hsa_executable_get_symbol, (hsa_executable_t e, const char* m,              \
     const char* n, hsa_agent_t a, int32_t cc, hsa_executable_symbol_t* s), (e, m, n, a, cc, s))\
  CF(hsa_status_t, hsa_executable_get_symbol_by_name, (hsa_executable_t e, const char* n,      \
     const hsa_agent_t* a, hsa_executable_symbol_t* s), (e, n, a, s))                          \
  CF(hsa_status_t, hsa_executable_symbol_get_info, (hsa_executable_symbol_t s,                 \
     hsa_executable_symbol_info_t a, void* v), (s, a, v))                                      \
  CF(hsa_status_t, hsa_executable_iterate_symbols, (hsa_executable_t e, hsa_status_t (*cb)(    \
     hsa_executable_t, hsa_executable_symbol_t, void*), void* d), (e, cb, d))                  \
  CF(hsa_status_t, hsa_executable_iterate_agent_symbols, (hsa_executable_t e, hsa_agent_t a,   \
     hsa_status_t (*cb)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*),        \
     void* d), (e, a, cb, d))                                                                  \
  CF(hsa_status_t, hsa_executable_iterate_program_symbols, (hsa_executable_t e,                \
     hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d), (e, cb, d))\
  AF(hsa_status_t, hsa_amd_profiling_set_profiler_enabled, (hsa_queue_t* q, int en), (q, en))  \
  AF(hsa_status_t, hsa_amd_profiling_async_copy_enable, (bool en), (en))                       \
  AF(hsa_status_t, hsa_amd_profiling_get_dispatch_time, (hsa_agent_t a, hsa_signal_t s,        \
     hsa_amd_profiling_dispatch_time_t* t), (a, s, t))                                         \
  AF(hsa_status_t, hsa_amd_profiling_get_async_copy_time, (hsa_signal_t s,                     \
     hsa_amd_profiling_async_copy_time_t* t), (s, t))                                          \
  AF(hsa_status_t, hsa_amd_profiling_convert_tick_to_system_domain, (hsa_agent_t a,            \
     uint64_t t, uint64_t* st), (a, t, st))                                                    \
  AF(hsa_status_t, hsa_amd_signal_async_handler, (hsa_signal_t s, hsa_signal_condition_t c,    \
     SV_T v, hsa_amd_signal_handler h, void* arg), (s, c, v, h, arg))                          \
  AF(hsa_status_t, hsa_amd_async_function, (void (*cb)(void*), void* arg), (cb, arg))          \
  AF(hsa_status_t, hsa_amd_signal_wait_any, (uint32_t n, hsa_signal_t* s,                      \
     hsa_signal_condition_t* c, SV_T* v, uint64_t t, hsa_wait_state_t w, SV_T* out),           \
     (n, s, c, v, t, w, out))                                                                  \
  AF(hsa_status_t, hsa_amd_queue_cu_set_mask, (const hsa_queue_t* q, uint32_t n,               \
     const uint32_t* m), (q, n, m))                                                            \
  AF(hsa_status_t, hsa_amd_memory_pool_get_info, (hsa_amd_memory_pool_t p,                     \
     hsa_amd_memory_pool_info_t a, void* v), (p, a, v))                                        \
  AF(hsa_status_t, hsa_amd_agent_iterate_memory_pools, (hsa_agent_t a,                         \
     hsa_status_t (*cb)(hsa_amd_memory_pool_t, void*), void* d), (a, cb, d))                   \
  AF(hsa_status_t, hsa_amd_memory_pool_allocate, (hsa_amd_memory_pool_t p, size_t n,           \
     uint32_t f, void** ptr), (p, n, f, ptr))                                                  \
  AF(hsa_status_t, hsa_amd_memory_pool_free, (void* p), (p))                                   \
  AF(hsa_status_t, hsa_amd_memory_async_copy, (void* d, hsa_agent_t da, const void* s,         \
     hsa_agent_t sa, size_t n, uint32_t nd, const hsa_signal_t* deps, hsa_signal_t c),         \
     (d, da, s, sa, n, nd, deps, c))                                                           \
  AF(hsa_status_t, hsa_amd_agent_memory_pool_get_info, (hsa_agent_t a,                         \
     hsa_amd_memory_pool_t p, hsa_amd_agent_memory_pool_info_t at, void* v), (a, p, at, v))   \
  AF(hsa_status_t, hsa_amd_agents_allow_access, (uint32_t n, const hsa_agent_t* a,             \
     const uint32_t* f, const void* p), (n, a, f, p))                                          \
  AF(hsa_status_t, hsa_amd_memory_pool_can_migrate, (hsa_amd_memory_pool_t s,                  \
     hsa_amd_memory_pool_t d, bool* r), (s, d, r))                                             \
  AF(hsa_status_t, hsa_amd_memory_lock, (void* h, size_t n, hsa_agent_t* a, int na,            \
     void** ap), (h, n, a, na, ap))                                                            \
  AF(hsa_status_t, hsa_amd_memory_unlock, (void* h), (h))                                      \
  AF(hsa_status_t, hsa_amd_memory_fill, (void* p, uint32_t v, size_t n), (p, v, n))            \
  AF(hsa_status_t, hsa_amd_pointer_info, (const void* p, hsa_amd_pointer_info_t* i,            \
     void* (*al)(size_t), uint32_t* na, hsa_agent_t** acc), (p, i, al, na, acc))               \
  AF(hsa_status_t, hsa_amd_pointer_info_set_userdata, (const void* p, void* u), (p, u))        \
  AF(hsa_status_t, hsa_amd_signal_create, (SV_T v, uint32_t n, const hsa_agent_t* c,           \
     uint64_t at, hsa_signal_t* s), (v, n, c, at, s))                                          \
  AX(hsa_status_t, hsa_amd_queue_intercept_create, (hsa_agent_t a, uint32_t n,                 \
     hsa_queue_type32_t t, void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* d,             \
     uint32_t ps, uint32_t gs, hsa_queue_t** q), (a, n, t, cb, d, ps, gs, q))                  \
  AX(hsa_status_t, hsa_amd_queue_intercept_register, (hsa_queue_t* q,                          \
     krsim_queue_intercept_handler h, void* d), (q, h, d))                                     \
  AF(hsa_status_t, hsa_amd_queue_set_priority, (hsa_queue_t* q,                                \
     hsa_amd_queue_priority_t p), (q, p))                                                      \
  AF(hsa_status_t, hsa_amd_vmem_address_reserve, (void** va, size_t n, uint64_t a,             \
     uint64_t f), (va, n, a, f))                                                               \
  AF(hsa_status_t, hsa_amd_vmem_address_free, (void* va, size_t n), (va, n))                   \
  AF(hsa_status_t, hsa_amd_vmem_handle_create, (hsa_amd_memory_pool_t p, size_t n,             \
     hsa_amd_memory_type_t t, uint64_t f, hsa_amd_vmem_alloc_handle_t* h), (p, n, t, f, h))   \
  AF(hsa_status_t, hsa_amd_vmem_handle_release, (hsa_amd_vmem_alloc_handle_t h), (h))          \
  AF(hsa_status_t, hsa_amd_vmem_map, (void* va, size_t n, size_t off,                          \
     hsa_amd_vmem_alloc_handle_t h, uint64_t f), (va, n, off, h, f))                           \
  AF(hsa_status_t, hsa_amd_vmem_unmap, (void* va, size_t n), (va, n))

/* Deprecated names the real library also exports: alias -> current table entry. */
#define KRSIM_ALIAS_LIST(ALIAS_F, ALIAS_V)                                                     \
  ALIAS_F(uint64_t, hsa_queue_load_read_index_acquire, hsa_queue_load_read_index_scacquire,   \
          (QC_T q), (q))                                                                       \
  ALIAS_F(uint64_t, hsa_queue_load_write_index_acquire, hsa_queue_load_write_index_scacquire, \
          (QC_T q), (q))                                                                       \
  ALIAS_V(hsa_queue_store_write_index_release, hsa_queue_store_write_index_screlease,         \
          (QC_T q, uint64_t v), (q, v))                                                        \
  ALIAS_V(hsa_queue_store_read_index_release, hsa_queue_store_read_index_screlease,           \
          (QC_T q, uint64_t v), (q, v))                                                        \
  ALIAS_F(uint64_t, hsa_queue_add_write_index_acquire, hsa_queue_add_write_index_scacquire,   \
          (QC_T q, uint64_t v), (q, v))                                                        \
  ALIAS_F(uint64_t, hsa_queue_add_write_index_release, hsa_queue_add_write_index_screlease,   \
          (QC_T q, uint64_t v), (q, v))                                                        \
  ALIAS_F(uint64_t, hsa_queue_add_write_index_acq_rel, hsa_queue_add_write_index_scacq_screl, \
          (QC_T q, uint64_t v), (q, v))                                                        \
  ALIAS_F(uint64_t, hsa_queue_cas_write_index_acquire, hsa_queue_cas_write_index_scacquire,   \
          (QC_T q, uint64_t e, uint64_t v), (q, e, v))                                         \
  ALIAS_F(uint64_t, hsa_queue_cas_write_index_release, hsa_queue_cas_write_index_screlease,   \
          (QC_T q, uint64_t e, uint64_t v), (q, e, v))                                         \
  ALIAS_F(uint64_t, hsa_queue_cas_write_index_acq_rel, hsa_queue_cas_write_index_scacq_screl, \
          (QC_T q, uint64_t e, uint64_t v), (q, e, v))                                         \
  ALIAS_F(SV_T, hsa_signal_load_acquire, hsa_signal_load_scacquire, (SIG_T s), (s))            \
  ALIAS_V(hsa_signal_store_release, hsa_signal_store_screlease, (SIG_T s, SV_T v), (s, v))     \
  ALIAS_F(SV_T, hsa_signal_wait_acquire, hsa_signal_wait_scacquire, (SIG_T s,                  \
          hsa_signal_condition_t c, SV_T v, uint64_t t, hsa_wait_state_t w), (s, c, v, t, w))  \
  ALIAS_SIG_V(ALIAS_V, and) ALIAS_SIG_V(ALIAS_V, or) ALIAS_SIG_V(ALIAS_V, xor)                 \
  ALIAS_SIG_V(ALIAS_V, add) ALIAS_SIG_V(ALIAS_V, subtract)                                     \
  ALIAS_F(SV_T, hsa_signal_exchange_acquire, hsa_signal_exchange_scacquire, (SIG_T s, SV_T v), \
          (s, v))                                                                              \
  ALIAS_F(SV_T, hsa_signal_exchange_release, hsa_signal_exchange_screlease, (SIG_T s, SV_T v), \
          (s, v))                                                                              \
  ALIAS_F(SV_T, hsa_signal_exchange_acq_rel, hsa_signal_exchange_scacq_screl,                  \
          (SIG_T s, SV_T v), (s, v))                                                           \
  ALIAS_F(SV_T, hsa_signal_cas_acquire, hsa_signal_cas_scacquire, (SIG_T s, SV_T e, SV_T v),   \
          (s, e, v))                                                                           \
  ALIAS_F(SV_T, hsa_signal_cas_release, hsa_signal_cas_screlease, (SIG_T s, SV_T e, SV_T v),   \
          (s, e, v))                                                                           \
  ALIAS_F(SV_T, hsa_signal_cas_acq_rel, hsa_signal_cas_scacq_screl, (SIG_T s, SV_T e, SV_T v), \
          (s, e, v))
#define ALIAS_SIG_V(ALIAS_V, op)                                                               \
  ALIAS_V(hsa_signal_##op##_acquire, hsa_signal_##op##_scacquire, (SIG_T s, SV_T v), (s, v))   \
  ALIAS_V(hsa_signal_##op##_release, hsa_signal_##op##_screlease, (SIG_T s, SV_T v), (s, v))   \
  ALIAS_V(hsa_signal_##op##_acq_rel, hsa_signal_##op##_scacq_screl, (SIG_T s, SV_T v), (s, v))
