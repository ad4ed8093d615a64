import { StrictMode, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { usePage } from './stores/route.ts';
import { useLoadInfo, useRunLoading } from './stores/run.ts';
import { Overview } from './components/Overview.tsx';
import { TrajectoryPage } from './components/TrajectoryPage.tsx';
import { PlaygroundPage } from './components/PlaygroundPage.tsx';
import { ComparePage } from './components/CompareView.tsx';
import { installKeyboard } from './keyboard.ts';
import './styles.css';

installKeyboard();

function App() {
  const page = usePage();
  const loadInfo = useLoadInfo();
  const loading = useRunLoading();
  useEffect(() => {
    void loadInfo();
  }, [loadInfo]);
  // While the server is still checking files, refresh the counts.
  useEffect(() => {
    if (!loading) return;
    const t = setInterval(() => void loadInfo(), 1000);
    return () => clearInterval(t);
  }, [loading, loadInfo]);
  if (page === 'compare') return <ComparePage />;
  return page === 'trajectory' ? <TrajectoryPage /> : page === 'playground' ? <PlaygroundPage /> : <Overview />;
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
