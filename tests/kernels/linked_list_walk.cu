/* A linked list in device memory: a self-referential struct whose next pointers jump around the buffer
 * (position j of the list is node (j * 37) % n). The block links the nodes, meets at a barrier, then every
 * thread walks from its own node to the end: a loop of a different length in each lane, through pointers,
 * summing the keys; a const method counts the nodes from `this`. */

struct node {
    int key;
    node *next;
    __device__ int length() const
    {
        int count = 0;
        for (const node *p = this; p; p = p->next)
            count++;
        return count;
    }
};

extern "C" __global__ void linkAndWalk(node *nodes, const int *keys, int *sums, int *lengths, int n)
{
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        int at = (j * 37) % n;
        nodes[at].key = keys[at];
        nodes[at].next = j + 1 < n ? &nodes[((j + 1) * 37) % n] : nullptr;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int sum = 0;
        for (const node *p = &nodes[i]; p != nullptr; p = p->next)
            sum += p->key;
        sums[i] = sum;
        lengths[i] = nodes[i].length();
    }
}
