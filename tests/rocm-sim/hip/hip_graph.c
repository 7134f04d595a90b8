/* hip_graph.c - graphs of kernel (and empty) nodes; hipGraphLaunch submits the whole
 * instantiated graph as one multi-packet batch with one doorbell. */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

struct hipGraphNode {
  hipGraph_t graph;
  hipGraphNodeType type;
  hipFunction_t fn; /* kernel nodes: resolved on the device current at creation */
  dim3 grid, block;
  uint32_t shmem;
  void* kernarg;    /* packed at creation, as HIP copies a node's parameters */
  hipGraphNode_t* deps;
  size_t ndeps;
  size_t index;     /* position in the graph */
};

struct ihipGraph {
  hipGraphNode_t* nodes;
  size_t count, cap;
};

struct hipGraphExec {
  krhip_launch* launches; /* topological order */
  size_t count;
  void* kernargs;         /* one block holding every launch's kernarg bytes */
};

HIP_EXPORT hipError_t hipGraphCreate(hipGraph_t* pGraph, unsigned int flags) {
  if (!pGraph || flags != 0) return krhip_ret(hipErrorInvalidValue);
  *pGraph = calloc(1, sizeof(**pGraph));
  return *pGraph ? hipSuccess : krhip_ret(hipErrorOutOfMemory);
}

static void node_free(hipGraphNode_t n) {
  free(n->kernarg);
  free(n->deps);
  free(n);
}

HIP_EXPORT hipError_t hipGraphDestroy(hipGraph_t graph) {
  if (!graph) return krhip_ret(hipErrorInvalidValue);
  for (size_t i = 0; i < graph->count; i++) node_free(graph->nodes[i]);
  free(graph->nodes);
  free(graph);
  return hipSuccess;
}

static hipError_t add_deps(hipGraphNode_t n, const hipGraphNode_t* deps, size_t ndeps) {
  if (ndeps == 0) return hipSuccess;
  if (!deps) return hipErrorInvalidValue;
  for (size_t i = 0; i < ndeps; i++)
    if (!deps[i] || deps[i]->graph != n->graph) return hipErrorInvalidValue;
  hipGraphNode_t* d = realloc(n->deps, (n->ndeps + ndeps) * sizeof(*d));
  if (!d) return hipErrorOutOfMemory;
  memcpy(d + n->ndeps, deps, ndeps * sizeof(*d));
  n->deps = d;
  n->ndeps += ndeps;
  return hipSuccess;
}

static hipError_t add_node(hipGraph_t graph, hipGraphNode_t n, const hipGraphNode_t* deps,
                           size_t ndeps) {
  n->graph = graph;
  hipError_t e = add_deps(n, deps, ndeps);
  if (e != hipSuccess) return e;
  if (graph->count == graph->cap) {
    size_t cap = graph->cap ? graph->cap * 2 : 8;
    hipGraphNode_t* nodes = realloc(graph->nodes, cap * sizeof(*nodes));
    if (!nodes) return hipErrorOutOfMemory;
    graph->nodes = nodes;
    graph->cap = cap;
  }
  n->index = graph->count;
  graph->nodes[graph->count++] = n;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGraphAddKernelNode(hipGraphNode_t* pGraphNode, hipGraph_t graph,
                                            const hipGraphNode_t* pDependencies,
                                            size_t numDependencies,
                                            const hipKernelNodeParams* pNodeParams) {
  if (!pGraphNode || !graph || !pNodeParams) return krhip_ret(hipErrorInvalidValue);
  const hipKernelNodeParams* p = pNodeParams;
  if (!p->gridDim.x || !p->gridDim.y || !p->gridDim.z || !p->blockDim.x || !p->blockDim.y ||
      !p->blockDim.z || (uint64_t)p->blockDim.x * p->blockDim.y * p->blockDim.z > 1024)
    return krhip_ret(hipErrorInvalidConfiguration);
  hipFunction_t f;
  hipError_t e = krhip_registered_function(p->func, -1, &f);
  if (e != hipSuccess) return krhip_ret(e);
  hipGraphNode_t n = calloc(1, sizeof(*n));
  if (!n) return krhip_ret(hipErrorOutOfMemory);
  n->type = hipGraphNodeTypeKernel;
  n->fn = f;
  n->grid = p->gridDim;
  n->block = p->blockDim;
  n->shmem = p->sharedMemBytes;
  n->kernarg = malloc(f->kernarg_size ? f->kernarg_size : 1);
  if (!n->kernarg) e = hipErrorOutOfMemory;
  if (e == hipSuccess) e = krhip_pack_args(f, p->kernelParams, p->extra, n->kernarg);
  if (e == hipSuccess) e = add_node(graph, n, pDependencies, numDependencies);
  if (e != hipSuccess) {
    node_free(n);
    return krhip_ret(e);
  }
  *pGraphNode = n;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGraphAddEmptyNode(hipGraphNode_t* pGraphNode, hipGraph_t graph,
                                           const hipGraphNode_t* pDependencies,
                                           size_t numDependencies) {
  if (!pGraphNode || !graph) return krhip_ret(hipErrorInvalidValue);
  hipGraphNode_t n = calloc(1, sizeof(*n));
  if (!n) return krhip_ret(hipErrorOutOfMemory);
  n->type = hipGraphNodeTypeEmpty;
  hipError_t e = add_node(graph, n, pDependencies, numDependencies);
  if (e != hipSuccess) {
    node_free(n);
    return krhip_ret(e);
  }
  *pGraphNode = n;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGraphAddDependencies(hipGraph_t graph, const hipGraphNode_t* from,
                                              const hipGraphNode_t* to, size_t numDependencies) {
  if (!graph || (numDependencies && (!from || !to))) return krhip_ret(hipErrorInvalidValue);
  for (size_t i = 0; i < numDependencies; i++) {
    if (!to[i] || to[i]->graph != graph) return krhip_ret(hipErrorInvalidValue);
    hipError_t e = add_deps(to[i], &from[i], 1);
    if (e != hipSuccess) return krhip_ret(e);
  }
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGraphGetNodes(hipGraph_t graph, hipGraphNode_t* nodes, size_t* numNodes) {
  if (!graph || !numNodes) return krhip_ret(hipErrorInvalidValue);
  if (nodes) {
    size_t n = *numNodes < graph->count ? *numNodes : graph->count;
    memcpy(nodes, graph->nodes, n * sizeof(*nodes));
  }
  *numNodes = graph->count;
  return hipSuccess;
}

/* Orders the nodes so every node follows its dependencies (Kahn); fails on a cycle. */
static hipError_t topo_order(hipGraph_t g, hipGraphNode_t* order) {
  size_t n = g->count;
  size_t* pending = calloc(n ? n : 1, sizeof(size_t));
  if (!pending) return hipErrorOutOfMemory;
  for (size_t i = 0; i < n; i++) pending[i] = g->nodes[i]->ndeps;
  size_t done = 0;
  bool progress = true;
  bool* placed = calloc(n ? n : 1, sizeof(bool));
  if (!placed) {
    free(pending);
    return hipErrorOutOfMemory;
  }
  while (done < n && progress) {
    progress = false;
    for (size_t i = 0; i < n; i++) {
      if (placed[i] || pending[i] != 0) continue;
      hipGraphNode_t node = g->nodes[i];
      placed[i] = true;
      order[done++] = node;
      progress = true;
      for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < g->nodes[j]->ndeps; k++)
          if (g->nodes[j]->deps[k] == node) pending[j]--;
    }
  }
  free(pending);
  free(placed);
  return done == n ? hipSuccess : hipErrorInvalidValue;
}

HIP_EXPORT hipError_t hipGraphInstantiate(hipGraphExec_t* pGraphExec, hipGraph_t graph,
                                          hipGraphNode_t* pErrorNode, char* pLogBuffer,
                                          size_t bufferSize) {
  if (pErrorNode) *pErrorNode = NULL;
  if (pLogBuffer && bufferSize) pLogBuffer[0] = 0;
  if (!pGraphExec || !graph) return krhip_ret(hipErrorInvalidValue);
  hipGraphNode_t* order = malloc((graph->count ? graph->count : 1) * sizeof(*order));
  hipGraphExec_t x = calloc(1, sizeof(*x));
  hipError_t e = order && x ? topo_order(graph, order) : hipErrorOutOfMemory;
  size_t bytes = 0, kernels = 0;
  for (size_t i = 0; e == hipSuccess && i < graph->count; i++) {
    if (order[i]->type != hipGraphNodeTypeKernel) continue;
    bytes += ((size_t)order[i]->fn->kernarg_size + 15) & ~(size_t)15;
    kernels++;
  }
  if (e == hipSuccess && kernels + 1 > KRHIP_QUEUE_SIZE) e = hipErrorInvalidValue;
  if (e == hipSuccess) {
    x->launches = calloc(kernels ? kernels : 1, sizeof(krhip_launch));
    x->kernargs = malloc(bytes ? bytes : 1);
    if (!x->launches || !x->kernargs) e = hipErrorOutOfMemory;
  }
  size_t off = 0;
  for (size_t i = 0; e == hipSuccess && i < graph->count; i++) {
    hipGraphNode_t n = order[i];
    if (n->type != hipGraphNodeTypeKernel) continue;
    char* dst = (char*)x->kernargs + off;
    memcpy(dst, n->kernarg, n->fn->kernarg_size);
    x->launches[x->count++] =
        (krhip_launch){.fn = n->fn, .grid = n->grid, .block = n->block, .shmem = n->shmem,
                       .kernarg = dst};
    off += ((size_t)n->fn->kernarg_size + 15) & ~(size_t)15;
  }
  free(order);
  if (e != hipSuccess) {
    if (x) {
      free(x->launches);
      free(x->kernargs);
    }
    free(x);
    return krhip_ret(e);
  }
  *pGraphExec = x;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* pGraphExec, hipGraph_t graph,
                                                   unsigned long long flags) {
  (void)flags;
  return hipGraphInstantiate(pGraphExec, graph, NULL, NULL, 0);
}

HIP_EXPORT hipError_t hipGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream) {
  if (!graphExec) return krhip_ret(hipErrorInvalidValue);
  hipStream_t s;
  hipError_t e = krhip_stream_resolve(stream, &s);
  if (e != hipSuccess) return krhip_ret(e);
  return krhip_ret(krhip_submit_batch(s, graphExec->launches, graphExec->count));
}

HIP_EXPORT hipError_t hipGraphExecDestroy(hipGraphExec_t graphExec) {
  if (!graphExec) return krhip_ret(hipErrorInvalidValue);
  free(graphExec->launches);
  free(graphExec->kernargs);
  free(graphExec);
  return hipSuccess;
}
