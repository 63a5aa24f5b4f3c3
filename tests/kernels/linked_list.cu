/* A linked list in device memory: a self-referential struct and pointers to it. One kernel links the pool's
 * nodes (node i points to node (i + STRIDE) % n, except the tail, which ends the list), the next walks from
 * every node to the end, summing keys and counting hops, and says which node it ended on. */

#define STRIDE 5

struct node {
    int key;
    node *next;
};

extern "C" __global__ void buildList(node *pool, const int *keys, int n, int tail)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    pool[i].key = keys[i];
    pool[i].next = i == tail ? NULL : &pool[(i + STRIDE) % n];
}

extern "C" __global__ void walkList(const node *pool, int n, int *sums, int *hops, int *last)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const node *p = &pool[i];
    int sum = 0, count = 0;
    while (p->next != NULL) {
        sum += p->key;
        p = p->next;
        count++;
    }
    sums[i] = sum + p->key;
    hops[i] = count;
    last[i] = (int)(p - pool);
}
