// A page over a run the server is still reading: load once, then again every second while loading.
import { useEffect } from 'react';

export function usePolledLoad(load: () => Promise<unknown>, loading: boolean | undefined): void {
  useEffect(() => {
    void load();
  }, [load]);
  useEffect(() => {
    if (!loading) return;
    const t = setInterval(() => void load(), 1000);
    return () => clearInterval(t);
  }, [loading, load]);
}
